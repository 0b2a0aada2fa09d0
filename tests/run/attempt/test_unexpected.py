"""An unexpected exception in an attempt keeps its evidence (the traceback, in the
attempt's folder), and a Ctrl-C or SystemExit reaching a worker thread stops the
run instead of failing the task."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gitkit import run_forge
from helpers.runkit import spawn_forge, state, write_plan

from forge.errors import ExitCode

PLAN = """
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]
"""


def _run(repo: Path, tmp_path: Path, fault: str) -> tuple[int, str]:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, PLAN))).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_FAULT": fault})
    out, err = p.communicate(timeout=60)
    return p.returncode, out + err


def test_a_bug_in_an_attempt_writes_its_traceback_and_points_at_it(
    repo: Path, tmp_path: Path
) -> None:
    code, output = _run(repo, tmp_path, "after-agent:error")
    assert code == ExitCode.FAILED, output
    task = state(repo)["tasks"]["a"]
    assert task["status"] == "FAILED"
    reason = task["reason"]
    assert reason.startswith("forge error: injected fault at after-agent (traceback in "), reason
    path = Path(reason.rpartition("(traceback in ")[2].rstrip(")"))
    assert path.name == "forge-error.txt" and path.parent.name == "attempt-1"
    text = path.read_text()
    assert text.startswith("Traceback (most recent call last):")
    assert "InjectedFault: injected fault at after-agent" in text
    assert "_steps" in text  # the frames that tell where the bug is


@pytest.mark.parametrize("how", ["interrupt", "exit"])
def test_a_stop_on_a_worker_thread_interrupts_and_fails_nothing(
    repo: Path, tmp_path: Path, how: str
) -> None:
    code, output = _run(repo, tmp_path, f"after-agent:{how}")
    assert code == ExitCode.INTERRUPTED, output
    task = state(repo)["tasks"]["a"]
    assert task["status"] == "INTERRUPTED", task
    assert task["attempts"][-1]["status"] == "INTERRUPTED"
    # Nothing was spent: the next run starts the task again and merges it.
    again = run_forge(repo, "run")
    assert again.returncode == 0, again.stdout + again.stderr
    assert state(repo)["tasks"]["a"]["status"] == "MERGED"
