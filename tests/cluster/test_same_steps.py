"""The same failing attempts end the same way on this machine and on a cluster
worker: one list of steps (forge.run.attempt.steps) runs in both places."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import state

pytest.importorskip("distributed")

PY = sys.executable

# Every task fails, each at a different step; `verify` rejects what `gate` lands.
PLAN = f"""
name = "p"
verify = "test ! -f g.txt"

[agents.quits]
command = ["{PY}", "{FAKES}/agent_fail.py", "the agent gave up", "--code", "3"]
models = ["m"]

[agents.same]
command = ["{PY}", "{FAKES}/agent_edit.py", "a.txt", "same", "--overwrite"]
models = ["m"]

[[task]]
id = "check"
run = "echo c > c.txt"
files = ["c.txt"]
check = "echo the check says no; exit 1"

[[task]]
id = "scope"
run = "echo s > elsewhere.txt"
files = ["s.txt"]

[[task]]
id = "empty"
run = "true"
files = ["e.txt"]

[[task]]
id = "exits"
run = "echo half > x.txt; echo it broke; exit 2"
files = ["x.txt"]

[[task]]
id = "quits"
prompt = "do it"
agent = "quits"
files = ["q.txt"]

[[task]]
id = "agent"
prompt = "do it"
agent = "same"
files = ["a.txt"]
check = "grep -q different a.txt"

[[task]]
id = "gate"
run = "echo g > g.txt"
files = ["g.txt"]
"""

KEYS = ("status", "reason", "stall", "feedback_source", "diff_hash")


def _outcomes(repo: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each task's attempts as (status, reason, stall, what judged it, its change),
    paths of this repository left out."""
    tasks = state(repo)["tasks"]
    return {
        tid: [
            tuple(re.sub(r"\(log [^)]*\)", "(log)", str(a.get(k))) for k in KEYS)
            for a in ts["attempts"]
        ]
        for tid, ts in tasks.items()
    }


def _phases(repo: Path) -> dict[str, list[list[str]]]:
    """Each task's attempts as the names of their phases, in the order they ran."""
    return {
        tid: [[p["name"] for p in a.get("phases") or ()] for a in ts["attempts"]]
        for tid, ts in state(repo)["tasks"].items()
    }


def test_failing_attempts_end_alike_here_and_on_a_cluster(repo: Path, tmp_path: Path) -> None:
    there = tmp_path / "there"
    git(repo.parent, "clone", "-q", str(repo), str(there))
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    for where in (repo, there):
        cp = run_forge(where, "plan", str(plan))
        assert cp.returncode == 0, cp.stderr
    here = run_forge(repo, "run", "--retry-failed", "1")
    cluster = run_forge(there, "run", "--retry-failed", "1", "--cluster", "local:1")
    assert here.returncode == cluster.returncode == 5, here.stdout + cluster.stdout
    local, remote = _outcomes(repo), _outcomes(there)
    assert local == remote
    # The same phases too (worktree, run or agent, check, queue, merge), timed.
    assert _phases(repo) == _phases(there)
    assert _phases(there)["check"][0] == ["worktree", "run", "check"]
    timed = [p for t in state(there)["tasks"].values() for a in t["attempts"] for p in a["phases"]]
    assert all(p["start"] <= p["end"] for p in timed)
    reasons = {tid: [a[1] for a in attempts] for tid, attempts in local.items()}
    no_progress = "no progress: the same change as the last failed attempt"
    assert reasons == {
        "check": ["check failed: the check says no", no_progress],
        "scope": ["changed files outside its declared files: elsewhere.txt"] * 2,
        "empty": ["no changes"] * 2,
        "exits": ["command exited 2: it broke"] * 2,
        "quits": ["agent exited 3: the agent gave up"] * 2,
        # The retry goes on from its own work and writes the same again.
        "agent": ["check failed: (no output)", "no changes"],
        # The gate blamed the first attempt: the same change again is no progress on
        # a worker too, and never goes back to the gate.
        "gate": ["breaks verification: lane verify exit 1 (log)", no_progress],
    }
    assert str(local["gate"][0][3]).startswith("verify:")
    attempts = [a for t in state(there)["tasks"].values() for a in t["attempts"]]
    assert all(a["where"] for a in attempts)
