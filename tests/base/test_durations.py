"""One duration grammar: every place forge reads a duration accepts the same forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge.agents.definition import AgentDef
from forge.agents.output import parse_retry_duration
from forge.base.durations import parse_duration
from forge.plan.load import load_plan
from forge.plan.repo_config import load_repo_config

FORMS = [("1d", 86400.0), ("500ms", 0.5), ("1h30m", 5400.0), ("90", 90.0), ("2 minutes", 120.0)]


@pytest.mark.parametrize(("text", "seconds"), FORMS)
def test_every_reader_accepts_every_form(tmp_path: Path, text: str, seconds: float) -> None:
    plan = tmp_path / "p.toml"
    plan.write_text(
        f'name = "p"\ntimeout = "{text}"\n[[task]]\nid = "a"\nrun = "true"\n'
        f'files = ["a"]\ntimeout = "{text}"\n'
    )
    loaded = load_plan(plan)
    assert loaded.timeout == loaded.tasks[0].timeout == seconds
    assert AgentDef.from_table("x", {"command": ["x"], "timeout": text}).timeout == seconds
    (tmp_path / "forge.toml").write_text(
        f'[verify]\ncommand = "true"\ntimeout = "{text}"\ngrace = "{text}"\n'
    )
    verify = load_repo_config(tmp_path).verify
    assert verify is not None and (verify.timeout, verify.grace) == (seconds, seconds)
    assert parse_retry_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["soon", "10x", "0s", "-5", "", "h", "1h soon"])
def test_every_reader_refuses_the_same_things(value: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)
    with pytest.raises(Exception, match="timeout"):
        AgentDef.from_table("x", {"command": ["x"], "timeout": value})


@given(
    st.lists(
        st.tuples(st.integers(0, 999), st.sampled_from(["ms", "s", "m", "h", "d"])),
        min_size=1,
        max_size=4,
    )
)
def test_parts_add_up(parts: list[tuple[int, str]]) -> None:
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    want = sum(n * scale[u] for n, u in parts)
    text = " ".join(f"{n}{u}" for n, u in parts)
    if want <= 0:
        with pytest.raises(ValueError):
            parse_duration(text)
    else:
        assert parse_duration(text) == pytest.approx(want)
