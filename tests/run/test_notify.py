"""`notify = "command"`: a person's command is told, as one JSON event on stdin, when
a run pauses, needs a person or ends; it has a time limit and never changes the
run's outcome."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from helpers.gitkit import commit_all, run_forge
from helpers.runkit import plan_and_run, write_plan

from forge.run.notify import Event, send

TASK = """
[[task]]
id = "{tid}"
title = "Write {tid}"
run = "{run}"
files = ["{tid}.txt"]
"""


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _plan(tmp_path: Path, notify: str, *tasks: tuple[str, str]) -> Path:
    body = f"notify = '''{notify}'''\n"
    body += "".join(TASK.format(tid=tid, run=run) for tid, run in tasks)
    return write_plan(tmp_path, body)


def test_a_run_that_ends_tells_the_command(repo: Path, tmp_path: Path) -> None:
    got = tmp_path / "got.jsonl"
    cp = plan_and_run(repo, _plan(tmp_path, f"cat >> {got}", ("a", "echo a > a.txt")))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    [event] = _events(got)
    assert set(event) == {"event", "plan", "tasks", "reason", "exit_code", "time"}
    assert event["event"] == "ended" and event["plan"] == "p" and event["exit_code"] == 0
    assert event["tasks"] == [{"id": "a", "status": "MERGED", "reason": ""}]
    assert event["reason"] == "1 of 1 task(s) merged, verification UNVERIFIED"
    assert event["time"].endswith(("Z", "+00:00"))


def test_spent_retries_need_a_person(repo: Path, tmp_path: Path) -> None:
    got = tmp_path / "got.jsonl"
    tasks = [("a", "echo a > a.txt"), ("bad", "echo no; exit 1")]
    cp = plan_and_run(repo, _plan(tmp_path, f"cat >> {got}", *tasks))
    assert cp.returncode == 5
    [event] = _events(got)
    assert event["event"] == "needs_person" and event["exit_code"] == 5
    assert [t["id"] for t in event["tasks"]] == ["bad"]
    assert event["reason"].startswith("bad: FAILED (")


def test_a_hold_pauses_and_says_why(repo: Path, tmp_path: Path) -> None:
    got = tmp_path / "got.jsonl"
    plan = _plan(tmp_path, f"cat >> {got}", ("a", "echo a > a.txt"))
    assert run_forge(repo, "hold", "--reason", "lunch").returncode == 0
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [event] = _events(got)
    assert event["event"] == "paused" and "lunch" in event["reason"]
    assert event["tasks"] == [{"id": "a", "status": "PENDING", "reason": ""}]


def test_a_failing_command_is_said_once_and_stops_nothing(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, _plan(tmp_path, "echo broken; exit 3", ("a", "echo a > a.txt")))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stderr.count("notify command exited 3") == 1, cp.stderr


def test_forge_toml_names_the_command_for_every_plan(repo: Path, tmp_path: Path) -> None:
    got = tmp_path / "got.jsonl"
    (repo / "forge.toml").write_text(f"notify = '''cat >> {got}'''\n")
    commit_all(repo, "forge.toml")
    plan = write_plan(tmp_path, TASK.format(tid="a", run="echo a > a.txt"))
    assert plan_and_run(repo, plan).returncode == 0
    assert [e["event"] for e in _events(got)] == ["ended"]


def test_a_command_past_its_limit_is_stopped_with_its_group(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    event = Event("ended", "p", [], "done", 0, "2026-01-01T00:00:00Z")
    said: list[str] = []
    started = time.monotonic()
    ok = send(
        f"sleep 60 & echo $! > {marker}; wait",
        event,
        cwd=tmp_path,
        logs=tmp_path / "logs",
        warn=said.append,
        limit=0.5,
    )
    assert not ok and time.monotonic() - started < 20
    assert len(said) == 1 and "took over 0.5s and was stopped" in said[0]
    child = int(marker.read_text())
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text()
