"""A setup belongs to its folder: a virtualenv names its folder in every script's
shebang, so a slot taken over from another plan (moved) runs its setup again, and
a check that runs a tool from the environment works in every slot of every plan,
running that slot's own environment, never another folder's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from helpers.gitkit import FAKES, commit_all, git
from helpers.runkit import plan_and_run, state, statuses, write_plan

SETUP = f"{sys.executable} {FAKES / 'venv_tool.py'}"


def _plan(tmp: Path, name: str, files: tuple[str, ...]) -> Path:
    tasks = "".join(
        f'[[task]]\nid = "{f.split(".")[0]}"\nrun = "echo {name} > {f}"\nfiles = ["{f}"]\n'
        'check = ".venv/bin/where"\n'
        for f in files
    )
    return write_plan(tmp, f"max_parallel = 1\nsetup = {SETUP!r}\n{tasks}", name=name)


def _slots(repo: Path, plan: str) -> list[str]:
    return [s["path"] for s in state(repo, plan).get("slots", {}).values()]


def test_a_slot_taken_over_runs_its_setup_again(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitignore").write_text(".venv/\n")
    commit_all(repo, "ignore the environment")
    cp = plan_and_run(repo, _plan(tmp_path, "a", ("a1.txt",)), "a")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (old,) = _slots(repo, "a")
    inode = os.stat(Path(old) / "README.md").st_ino
    cp = plan_and_run(repo, _plan(tmp_path, "b", ("b1.txt", "b2.txt")), "b")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo, "b") == {"b1": "MERGED", "b2": "MERGED"}
    (new,) = _slots(repo, "b")
    assert os.stat(Path(new) / "README.md").st_ino == inode  # still taken over, not made anew
    # The check ran the environment of the slot it ran in, and said which.
    log = (repo / ".git" / "forge" / "plans" / "b").rglob("check.log")
    said = "".join(p.read_text() for p in log)
    assert f"in {new}" in said and old not in said, said
    assert git(Path(new), "status", "--porcelain") == ""
