"""Liveness you can trust: a pid alone lies, so every "is that forge process alive?"
checks the pid and the process start time, and says what it decided."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import run_forge
from helpers.runkit import statuses, wait_for, write_plan

from forge.base.files import plan_lock
from forge.base.liveness import Owner, start_time
from forge.errors import Busy
from forge.git.repo import discover


def _dead_owner() -> Owner:
    """An owner record of a process that ran (with its real start time) and is gone."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        owner = Owner(pid=child.pid, start=start_time(child.pid), host=socket.gethostname())
        assert owner.start is not None and owner.alive()
    finally:
        child.kill()
        child.wait()
    return owner


def test_self_is_alive() -> None:
    me = Owner.me("test")
    assert me.start == start_time(os.getpid())
    assert me.alive()


def test_a_dead_pid_is_not_alive() -> None:
    assert not _dead_owner().alive()


def test_a_reused_pid_is_not_the_old_process() -> None:
    # Same pid, another start time: the pid was reused by a process that is not ours.
    me = Owner.me()
    assert me.start is not None
    assert not Owner(pid=me.pid, start=me.start - 1, host=me.host).alive()
    child = subprocess.Popen(["sleep", "30"])
    try:
        real = start_time(child.pid)
        assert real is not None
        assert Owner(pid=child.pid, start=real, host=me.host).alive()
        assert not Owner(pid=child.pid, start=real + 100, host=me.host).alive()
    finally:
        child.kill()
        child.wait()


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen(["true"])
    owner = Owner(pid=child.pid, start=None, host=socket.gethostname())
    wait_for(lambda: start_time(child.pid) is None, what="the child to end (a zombie)")
    assert Path(f"/proc/{child.pid}").exists(), "not reaped yet: still a zombie"
    assert not owner.alive()
    child.wait()


def test_an_owner_on_another_host_counts_as_alive() -> None:
    # It cannot be checked from here: fail closed.
    assert Owner(pid=1, start=1, host="elsewhere.invalid").alive()


def test_owner_records_round_trip() -> None:
    me = Owner.me("forge run")
    assert Owner.from_dict(json.loads(json.dumps(me.to_dict()))) == me
    assert f"pid {me.pid}" in me.describe() and "forge run" in me.describe()


HOLDER = """
import sys, time
from pathlib import Path
from forge.git.repo import discover
from forge.base.files import plan_lock
repo = discover(Path(sys.argv[1]))
with plan_lock(repo.state, "p", command="forge holder-test"):
    Path(sys.argv[2]).write_text("locked")
    while not Path(sys.argv[3]).exists():
        time.sleep(0.02)  # sleep-ok: a poll for the test's release marker
"""


def test_the_plan_lock_names_its_live_holder(repo: Path, tmp_path: Path) -> None:
    locked, go = tmp_path / "locked", tmp_path / "go"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(repo), str(locked), str(go)])
    try:
        wait_for(lambda: locked.exists() or child.poll() is not None, what="the lock holder")
        assert child.poll() is None
        state = discover(repo).state
        with pytest.raises(Busy) as info, plan_lock(state, "p", command="forge run"):
            pass
        msg = str(info.value)
        assert f"pid {child.pid}" in msg and "holder-test" in msg and "plan 'p' is busy" in msg
        # owner.json is only a name for the lock; one naming a dead process while
        # the lock is held is reported as such, not as the holder.
        owner_file = state.plan_dir("p") / "owner.json"
        dead = _dead_owner()
        owner_file.write_text(json.dumps(dead.to_dict()))
        with pytest.raises(Busy) as info, plan_lock(state, "p", command="forge run"):
            pass
        assert "is gone" in str(info.value) and f"pid {dead.pid}" in str(info.value)
        assert "busy" in str(info.value)
    finally:
        go.write_text("go")
        child.wait(timeout=30)
    assert child.returncode == 0
    # its holder gone, the lock is free again
    with plan_lock(discover(repo).state, "p", command="forge run") as me:
        assert me.pid == os.getpid()


def test_a_stale_owner_file_does_not_block_a_run(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n')
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    owner_file = repo / ".git/forge/plans/p/owner.json"
    # Left by a runner killed with -9; it even names a live process (this one),
    # but nobody holds the lock, and the lock is what decides.
    owner_file.write_text(json.dumps(Owner.me("forge run").to_dict()))
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}
    assert not owner_file.exists(), "the run removes its owner record when it ends"


def test_status_says_a_recorded_runner_is_gone(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n')
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    dead = _dead_owner()
    (repo / ".git/forge/plans/p/owner.json").write_text(json.dumps(dead.to_dict()))
    cp = run_forge(repo, "status", "--json")
    assert cp.returncode == 0, cp.stderr
    data = json.loads(cp.stdout)
    assert f"pid {dead.pid}" in data["runner"] and "(gone)" in data["runner"]
