"""Every example plan in plans/ stays valid: it loads, and its waves compute."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.plan.dag import compute_waves, critical_path
from forge.plan.load import load_plan

PLANS = sorted((Path(__file__).resolve().parents[2] / "plans").glob("*.toml"))


def test_there_is_an_example() -> None:
    assert any(p.name == "example.toml" for p in PLANS)


@pytest.mark.parametrize("path", PLANS, ids=[p.name for p in PLANS])
def test_plan_is_valid(path: Path) -> None:
    plan = load_plan(path)
    waves = compute_waves(plan)
    assert sorted(t for w in waves.waves for t in w) == sorted(plan.task_ids)
    assert set(critical_path(plan)) == set(plan.task_ids)


def test_example_shows_what_it_promises() -> None:
    plan = load_plan(Path(__file__).resolve().parents[2] / "plans" / "example.toml")
    waves = compute_waves(plan)
    assert any(t.deps for t in plan.tasks)  # dependencies
    assert waves.deferrals  # an overlap that causes a deferral
    assert any(t.is_shell for t in plan.tasks)  # a shell task
    assert any(t.prompt for t in plan.tasks)  # a prompt task


def test_the_readme_plan_is_valid(tmp_path: Path) -> None:
    """The plans the README and the plans guide show a person are ones forge accepts."""
    import re

    root = Path(__file__).resolve().parents[2]
    plans = []
    for doc in (root / "README.md", root / "docs" / "guide" / "plans.md"):
        text = doc.read_text()
        shown = [b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[[task]]" in b]
        assert shown, f"{doc.name} shows a plan"
        plans += shown
    for n, text in enumerate(plans):
        path = tmp_path / f"readme-{n}.toml"
        path.write_text(text)
        assert compute_waves(load_plan(path)).waves
