"""A slot's own `.git` is put there once before a task's command runs, not at
every move of forge's HEAD or index (each copy of the index is megabytes on a
large repository), and a task's command always sees what forge's git dir says."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.gitkit import git
from helpers.runkit import plan_and_run, state, statuses, write_plan

from forge.git import worktrees
from forge.git.contained import Contained
from forge.git.repo import discover


def _slot(repo: Path) -> tuple[Contained, Path]:
    path = Path(os.environ["FORGE_WORKTREES"]) / "slot"
    worktrees.add(discover(repo), path, git(repo, "rev-parse", "HEAD"))
    return Contained(discover(repo), path), path


def test_a_new_slot_has_its_git_dir_at_once(repo: Path) -> None:
    slot, path = _slot(repo)
    assert not slot.owes()
    assert git(path, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")
    assert git(path, "status", "--porcelain") == ""


def test_moves_are_handed_over_once_before_the_next_command(repo: Path) -> None:
    slot, path = _slot(repo)
    base = git(repo, "rev-parse", "HEAD")
    dot_git = os.stat(path / ".git").st_ino
    (path / "a.txt").write_text("a\n")
    first = worktrees.commit_all(discover(repo), path, "one", branch="refs/heads/t1")
    (path / "b.txt").write_text("b\n")
    second = worktrees.commit_all(discover(repo), path, "two", branch="refs/heads/t1")
    worktrees.detach(discover(repo), path)
    # Three moves of forge's HEAD and index, and the task's `.git` is not put anew yet:
    # nothing of the task's has run since.
    assert slot.owes()
    assert os.stat(path / ".git").st_ino == dot_git
    assert git(path, "rev-parse", "HEAD") == base
    # What the task's `.git` names is superseded: not taken for the task's own commit.
    assert slot.task_head() is None
    assert slot.base() == second
    slot.settle()
    assert not slot.owes()
    assert os.stat(path / ".git").st_ino != dot_git
    assert git(path, "rev-parse", "HEAD") == second
    assert git(path, "rev-parse", "HEAD^") == first
    assert git(path, "status", "--porcelain") == ""
    replaced = os.stat(path / ".git").st_ino
    slot.settle()  # owed nothing: not put again
    assert os.stat(path / ".git").st_ino == replaced


def test_a_task_command_sees_forges_head_and_index(repo: Path, tmp_path: Path) -> None:
    """The check runs after forge committed the task's work: its git sees that
    commit and a clean tree; after the run a person looking into the slot does too."""
    base = git(repo, "rev-parse", "HEAD")
    seen = tmp_path / "seen.txt"
    check = (
        f'test -z "$(git status --porcelain)" && git rev-parse HEAD > {seen} '
        f'&& test "$(git rev-parse HEAD)" != {base}'
    )
    plan = write_plan(
        tmp_path,
        f'[[task]]\nid = "t1"\nrun = "echo one >> a.txt"\nfiles = ["a.txt"]\ncheck = \'{check}\'\n',
    )
    cp = plan_and_run(repo, plan, "p")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"t1": "MERGED"}
    commit = seen.read_text().strip()
    assert git(repo, "rev-parse", "refs/heads/forge/p/t1") == commit
    (slot,) = state(repo)["slots"].values()
    path = Path(slot["path"])
    assert git(path, "rev-parse", "HEAD") == commit
    assert git(path, "status", "--porcelain") == ""
    assert not Contained(discover(repo), path).owes()
