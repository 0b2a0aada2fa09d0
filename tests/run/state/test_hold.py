"""Holds: a file that stops new dispatches, repository-wide or for one plan; it
survives restarts, fails closed when unreadable, and is removed compare-first."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from helpers.gitkit import run_forge
from helpers.runkit import merge_count, spawn_forge, state, statuses, wait_for, write_plan

from forge.base.liveness import Owner, start_time
from forge.errors import ForgeError
from forge.git.repo import discover
from forge.run.state import hold as holds

TWO = """
max_parallel = 1
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
run = "echo b > b.txt"
files = ["b.txt"]
"""


def _record(repo: Path, tmp_path: Path, body: str = TWO, name: str = "p") -> None:
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body, name=name)))
    assert cp.returncode == 0, cp.stderr


def _attempts(repo: Path, plan: str = "p") -> int:
    path = repo / f".git/forge/plans/{plan}/state.json"
    if not path.exists():
        return 0
    return sum(len(t["attempts"]) for t in state(repo, plan)["tasks"].values())


def test_a_hold_stops_a_run_before_it_starts_anything(repo: Path, tmp_path: Path) -> None:
    _record(repo, tmp_path)
    cp = run_forge(repo, "hold", "--reason", "deploy freeze")
    assert cp.returncode == 0, cp.stderr
    assert "forge resume" in cp.stdout
    cp = run_forge(repo, "run")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    out = cp.stdout + cp.stderr
    assert "deploy freeze" in out and "repository held" in out and " by " in out
    assert _attempts(repo) == 0, "a held run started a task"
    # it survives restarts: still held for the next process
    assert run_forge(repo, "run").returncode == 8
    assert run_forge(repo, "resume").returncode == 0
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}


@pytest.mark.slow
def test_a_plan_hold_holds_only_that_plan(repo: Path, tmp_path: Path) -> None:
    _record(repo, tmp_path, name="p")
    _record(repo, tmp_path, TWO.replace("a.txt", "qa.txt").replace("b.txt", "qb.txt"), name="q")
    assert run_forge(repo, "hold", "--reason", "p is under review", "--plan", "p").returncode == 0
    cp = run_forge(repo, "run", "q")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = run_forge(repo, "run", "p")
    assert cp.returncode == 8 and "p is under review" in cp.stdout + cp.stderr
    assert _attempts(repo, "p") == 0
    # a repository-wide resume does not lift a plan's hold
    assert "no hold" in run_forge(repo, "resume").stdout
    assert run_forge(repo, "run", "p").returncode == 8
    assert run_forge(repo, "resume", "--plan", "p").returncode == 0
    assert run_forge(repo, "run", "p").returncode == 0


def test_a_hold_set_during_a_run_lets_running_tasks_finish(repo: Path, tmp_path: Path) -> None:
    started, go = tmp_path / "started", tmp_path / "go"
    body = TWO.replace(
        'run = "echo a > a.txt"',
        f'run = "touch {started}; while [ ! -f {go} ]; do sleep 0.02; done; echo a > a.txt"',
    )
    _record(repo, tmp_path, body)
    p = spawn_forge(repo, "run")
    wait_for(started.exists, what="a started")
    assert run_forge(repo, "hold", "--reason", "stop for lunch").returncode == 0
    go.write_text("go")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 8, out + err
    assert "stop for lunch" in out + err
    assert statuses(repo) == {"a": "MERGED", "b": "PENDING"}, "the running task finished"
    assert state(repo)["tasks"]["b"]["attempts"] == [], "nothing new started"
    assert run_forge(repo, "resume").returncode == 0
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert merge_count(repo, "a") == 1 and merge_count(repo, "b") == 1


@pytest.mark.parametrize("garbage", ["text", "json-without-reason", "folder"])
def test_an_unreadable_hold_file_is_a_hold(garbage: str, repo: Path, tmp_path: Path) -> None:
    _record(repo, tmp_path)
    hold_file = repo / ".git/forge/hold.json"
    if garbage == "text":
        hold_file.write_bytes(b"\x00not json")
    elif garbage == "json-without-reason":
        hold_file.write_text(json.dumps({"since": "yesterday"}))
    else:
        hold_file.mkdir()
    cp = run_forge(repo, "run")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    out = cp.stdout + cp.stderr
    assert str(hold_file) in out and "counts as a hold" in out and "forge resume" in out
    assert "Traceback" not in out
    assert _attempts(repo) == 0
    st = run_forge(repo, "status")
    assert st.returncode == 0 and "counts as a hold" in st.stdout
    cp = run_forge(repo, "resume")
    assert cp.returncode == 0, cp.stderr
    assert not hold_file.exists()
    assert run_forge(repo, "run").returncode == 0


def test_release_compares_before_it_removes(repo: Path) -> None:
    state_dir = discover(repo).state
    holds.set_hold(state_dir, None, reason="first")
    seen = holds.digest(state_dir.hold_file)
    holds.set_hold(state_dir, None, reason="second, set in between")
    with pytest.raises(ForgeError, match="changed"):
        holds.release(state_dir, None, expected=seen)
    kept = holds.read(state_dir, None)
    assert kept is not None and kept.reason == "second, set in between"
    leftovers = [p.name for p in state_dir.root.iterdir() if p.name != "hold.json"]
    assert not [n for n in leftovers if "release" in n], "no temporary file left behind"
    removed = holds.release(state_dir, None, expected=holds.digest(state_dir.hold_file))
    assert removed is not None and removed.reason == "second, set in between"
    assert holds.read(state_dir, None) is None
    assert holds.release(state_dir, None) is None  # nothing to remove: fine


def test_status_reports_a_hold_whose_owner_died(repo: Path, tmp_path: Path) -> None:
    _record(repo, tmp_path)
    child = subprocess.Popen(["sleep", "30"])
    owner = Owner(child.pid, start_time(child.pid), socket.gethostname(), "forge verify")
    holds.set_hold(discover(repo).state, "p", reason="verifying", owner=owner)
    cp = run_forge(repo, "status")
    assert cp.returncode == 0, cp.stderr
    assert f"pid {child.pid}" in cp.stdout and "verifying" in cp.stdout
    assert "died" not in cp.stdout
    child.kill()
    child.wait()
    cp = run_forge(repo, "status", "--json")
    data = json.loads(cp.stdout)
    assert "verifying" in data["hold"] and "has died" in data["hold"]
