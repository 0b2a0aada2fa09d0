"""One TOML table reader: a mistake in an `[agents.NAME]` table, in a plan or in
forge.toml, is reported when the file is read, one line each, with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.errors import PlanError
from forge.plan.load import load_plan
from forge.plan.repo_config import load_repo_config

TABLE = """\
[agents.mine]
command = ["my-agent", "{prompt_file}", "{model}"]
models = ["small"]
timeout = "soon"
prompt_on_stdin = "yes"
colour = "red"
"""


def test_forge_toml_agent_problems_each_have_their_line(tmp_path: Path) -> None:
    path = tmp_path / "forge.toml"
    path.write_text('[verify]\ncommand = "true"\n\n' + TABLE)
    with pytest.raises(PlanError) as info:
        load_repo_config(tmp_path)
    got = info.value.problems
    assert f"{path}:7: agent `mine`: timeout must be a duration" in "\n".join(got)
    assert any(p.startswith(f"{path}:8: agent `mine`: prompt_on_stdin must be") for p in got)
    assert any(p.startswith(f"{path}:9: agent `mine`: unknown key colour") for p in got)
    assert len(got) == 3 and all("; " not in p for p in got)
    # the hooks and `forge verify` need only [verify]: they are not stopped by it
    assert load_repo_config(tmp_path, read_agents=False).verify is not None


def test_a_plan_agent_table_is_read_the_same_way(tmp_path: Path) -> None:
    plan = tmp_path / "p.toml"
    plan.write_text('name = "p"\n[[task]]\nid = "a"\nrun = "true"\nfiles = ["a"]\n\n' + TABLE)
    with pytest.raises(PlanError) as info:
        load_plan(plan)
    assert f"{plan}:10: agent `mine`: timeout must be a duration" in "\n".join(info.value.problems)


def test_a_table_named_like_a_preset_is_read_over_it(tmp_path: Path) -> None:
    (tmp_path / "forge.toml").write_text('[agents.claude]\nmodels = ["opus"]\n')
    assert load_repo_config(tmp_path).agents["claude"] == {"models": ["opus"]}
    (tmp_path / "forge.toml").write_text('[agents.claude]\ndefault_model = "nosuch"\n')
    with pytest.raises(PlanError, match=r"forge.toml:2: agent `claude`: default_model 'nosuch'"):
        load_repo_config(tmp_path)
