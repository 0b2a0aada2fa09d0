"""The settings object: built from the environment and flags, checked, never written back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forge.base.settings import DEFAULT_GRACE, DEFAULT_INFRA_BACKOFF, Settings
from forge.errors import ExitCode, ForgeError
from forge.git.worktree_root import worktrees_for


def test_defaults_when_nothing_is_set() -> None:
    s = Settings.from_env({})
    assert s == Settings(
        worktree_root=None, grace=DEFAULT_GRACE, infra_backoff=DEFAULT_INFRA_BACKOFF
    )
    assert worktrees_for(s, Path("/src/app"), Path("/src/app/.git")) == Path(
        "/src/.forge-worktrees/app"
    )
    assert s.child_env() == {}


def test_values_from_the_environment(tmp_path: Path) -> None:
    env = {"FORGE_WORKTREES": str(tmp_path), "FORGE_GRACE": "500ms", "FORGE_INFRA_BACKOFF": " 0 "}
    s = Settings.from_env(env)
    assert (s.worktree_root, s.grace, s.infra_backoff) == (tmp_path.resolve(), 0.5, 0.0)
    assert worktrees_for(s, Path("/src/app"), Path("/src/app/.git")) == tmp_path.resolve() / "app"
    assert s.child_env() == {"FORGE_WORKTREES": str(tmp_path.resolve())}


def test_the_flag_wins_over_the_variable_and_the_environment_is_not_written(
    tmp_path: Path,
) -> None:
    before = dict(os.environ)
    s = Settings.from_env({"FORGE_WORKTREES": "/elsewhere"}, worktree_root=tmp_path / "wt")
    assert s.worktree_root == (tmp_path / "wt").resolve()
    assert dict(os.environ) == before


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf", "5x"])
@pytest.mark.parametrize("var", ["FORGE_GRACE", "FORGE_INFRA_BACKOFF"])
def test_a_bad_value_names_the_variable(var: str, value: str) -> None:
    with pytest.raises(ForgeError) as info:
        Settings.from_env({var: value})
    assert info.value.code == ExitCode.USAGE
    assert str(info.value).startswith(f"{var}={value!r}")
