"""Every step of an attempt has a time limit: setup its own, the check a share of
the attempt's."""

from __future__ import annotations

import time
from pathlib import Path

from helpers.runkit import plan_and_run, state, write_plan

_TASK = """
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]
"""


def test_the_check_counts_in_the_attempts_timeout(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'timeout = "3s"\n' + _TASK + 'check = "sleep 20"\n')
    started = time.monotonic()
    cp = plan_and_run(repo, plan)
    took = time.monotonic() - started
    assert cp.returncode == 5, cp.stdout + cp.stderr
    st = state(repo)["tasks"]["a"]
    assert st["status"] == "TIMEOUT"
    assert "check timed out" in st["reason"] and "3s" in st["reason"]
    assert took < 15, took  # not the 20 s the check asked for


def test_a_setup_that_hangs_times_out_naming_setup(repo: Path, tmp_path: Path) -> None:
    body = 'setup = "sleep 20"\nsetup_timeout = "1s"\n' + _TASK
    started = time.monotonic()
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert time.monotonic() - started < 15
    st = state(repo)["tasks"]["a"]
    assert st["status"] == "TIMEOUT"
    assert st["reason"] == "setup timed out after 1s (setup_timeout)"
    assert "TIMEOUT" in cp.stdout and "setup timed out" in cp.stdout


def test_a_check_within_the_time_left_passes(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'timeout = "30s"\n' + _TASK + 'check = "test -f a.txt"\n')
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert state(repo)["tasks"]["a"]["status"] == "MERGED"


def test_setup_timeout_must_be_a_duration(repo: Path, tmp_path: Path) -> None:
    from helpers.gitkit import run_forge

    plan = write_plan(tmp_path, 'setup_timeout = "soon"\n' + _TASK)
    cp = run_forge(repo, "plan", str(plan))
    assert cp.returncode == 2
    assert "setup_timeout" in cp.stderr and "soon" in cp.stderr
