"""A plan's new slot is an idle slot of a finished plan, moved over instead of
checked out anew; never one that holds work, nor one of a plan that is running."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from helpers.gitkit import FAKES, git
from helpers.runkit import plan_and_run, state, statuses, write_plan

from forge.base.files import plan_lock
from forge.git.repo import discover

_TASK = '[[task]]\nid = "{id}"\nrun = "{run}"\nfiles = ["{file}"]\n'


def _plan(tmp: Path, name: str, *tasks: tuple[str, str, str]) -> Path:
    body = "max_parallel = 1\n" + "".join(_TASK.format(id=t, run=r, file=f) for t, r, f in tasks)
    return write_plan(tmp, body, name=name)


def _slots(repo: Path, plan: str) -> dict[str, str]:
    return {name: s["path"] for name, s in state(repo, plan).get("slots", {}).items()}


def test_a_new_plan_takes_the_idle_slot_of_a_finished_one(repo: Path, tmp_path: Path) -> None:
    a = _plan(tmp_path, "a", ("t1", "echo one >> a.txt", "a.txt"))
    assert plan_and_run(repo, a, "a").returncode == 0
    (old,) = _slots(repo, "a").values()
    inode = os.stat(Path(old) / "README.md").st_ino
    b = _plan(tmp_path, "b", ("t1", "echo two >> b.txt", "b.txt"))
    cp = plan_and_run(repo, b, "b")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo, "b") == {"t1": "MERGED"}
    assert _slots(repo, "a") == {}  # plan a let it go
    (new,) = _slots(repo, "b").values()
    assert Path(new).parent.name == "b" and not Path(old).exists()
    assert os.stat(Path(new) / "README.md").st_ino == inode  # moved, not checked out anew
    # b's work, and nothing of a's: the slot holds b's merged commit, clean.
    assert git(Path(new), "status", "--porcelain") == ""
    assert (Path(new) / "b.txt").read_text() == "two\n"
    assert not (Path(new) / "a.txt").exists()
    # a's merged commit, which the slot's own `.git` named, is not taken for b's work.
    assert git(repo, "for-each-ref", "refs/forge/salvage/") == ""


def test_a_slot_holding_work_or_a_running_plan_is_left_alone(repo: Path, tmp_path: Path) -> None:
    a = _plan(tmp_path, "a", ("t1", "echo one >> a.txt; exit 1", "a.txt"))
    assert plan_and_run(repo, a, "a").returncode != 0
    assert statuses(repo, "a") == {"t1": "FAILED"}
    held = _slots(repo, "a")
    b = _plan(tmp_path, "b", ("t1", "echo two >> b.txt", "b.txt"))
    assert plan_and_run(repo, b, "b").returncode == 0
    assert _slots(repo, "a") == held  # the failed task's slot keeps its work
    assert all(Path(p).exists() for p in held.values())
    # b's slot is idle now, but b's run lock is held: c makes a slot of its own.
    c = _plan(tmp_path, "c", ("t1", "echo three >> c.txt", "c.txt"))
    with plan_lock(discover(repo).state, "b", command="test"):
        assert plan_and_run(repo, c, "c").returncode == 0
    assert len(_slots(repo, "b")) == 1
    assert Path(next(iter(_slots(repo, "c").values()))).exists()


def _together(tmp: Path, name: str, n: int) -> Path:
    """A plan of `n` tasks that each write their file once all `n` are running."""
    gate = tmp / f"gate-{name}"
    fake = FAKES / "together.py"
    tasks = [
        (f"t{i}", f"{sys.executable} {fake} {gate} {n} {name}{i}.txt", f"{name}{i}.txt")
        for i in range(n)
    ]
    body = f"max_parallel = {n}\n" + "".join(_TASK.format(id=t, run=r, file=f) for t, r, f in tasks)
    return write_plan(tmp, body, name=name)


def test_every_waiting_task_gets_an_idle_slot_at_once(repo: Path, tmp_path: Path) -> None:
    """Three tasks that start together take the three idle slots of a finished plan,
    all three moved over (none checked out anew while another is being taken)."""
    cp = plan_and_run(repo, _together(tmp_path, "a", 3), "a")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    old = _slots(repo, "a")
    assert len(old) == 3
    inodes = {os.stat(Path(p) / "README.md").st_ino for p in old.values()}
    cp = plan_and_run(repo, _together(tmp_path, "b", 3), "b")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo, "b") == {"t0": "MERGED", "t1": "MERGED", "t2": "MERGED"}
    assert _slots(repo, "a") == {}
    new = _slots(repo, "b")
    assert {os.stat(Path(p) / "README.md").st_ino for p in new.values()} == inodes
