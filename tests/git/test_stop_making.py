"""A slot still being made when the run needs it no more is stopped, not waited
for: its checkout is killed, the half-made folder goes, the name is free again."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from helpers.gitkit import git
from helpers.runkit import wait_for

from forge.base import proc
from forge.git import contained, worktrees
from forge.git.repo import discover


def test_a_command_given_a_stop_event_is_killed_when_it_is_set(tmp_path: Path) -> None:
    stop = threading.Event()
    timer = threading.Timer(0.2, stop.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(proc.Stopped):
        proc.run(["sleep", "30"], cwd=tmp_path, stop=stop)
    assert time.monotonic() - started < 10
    timer.join()
    # Not set: the command runs to its end and says what it printed.
    done = proc.run(["echo", "hi"], cwd=tmp_path, stop=threading.Event())
    assert done.returncode == 0 and done.stdout == "hi\n"
    with pytest.raises(proc.CommandError):
        proc.run(["false"], cwd=tmp_path, stop=threading.Event())


def test_a_stopped_slot_is_discarded_and_its_name_free(repo: Path) -> None:
    r = discover(repo)
    root = Path(os.environ["FORGE_WORKTREES"]) / "p"
    path = root / "slot-1"
    stop = threading.Event()
    stop.set()
    with pytest.raises(proc.Stopped):
        worktrees.add(r, path, git(repo, "rev-parse", "HEAD"), stop=stop)
    assert not path.exists()
    assert not contained.view_dir(path).exists()
    wait_for(lambda: not os.listdir(root), what="the discarded folder removed")
    # The name is free: the slot is made there next time, whole.
    worktrees.add(r, path, git(repo, "rev-parse", "HEAD"))
    assert git(path, "status", "--porcelain") == ""
    assert (path / "README.md").read_text() == "# test repo\n"


def test_what_a_killed_run_left_discarded_is_swept(tmp_path: Path) -> None:
    aside = tmp_path / f"slot-2{worktrees.DISCARDED}1-1"
    (aside / "deep").mkdir(parents=True)
    (aside / "deep" / "f.txt").write_text("x")
    keep = tmp_path / "slot-1"
    keep.mkdir()
    worktrees.sweep_discarded(tmp_path)
    wait_for(lambda: not aside.exists(), what="the leftover removed")
    assert keep.exists()
