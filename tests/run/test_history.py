"""The attempts history: concurrent writers (runs of different plans) lose nothing;
an INFRA attempt's row names the kind it ended with."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES
from helpers.runkit import plan_and_run, state, wait_for, write_plan

from forge.base.files import StateDir
from forge.run.records import history

WRITER = """
import sys
import time
from pathlib import Path
from forge.run.records.history import connect

path, plan = Path(sys.argv[1]), sys.argv[2]
Path(sys.argv[3]).touch()
while not Path(sys.argv[4]).exists():  # both start writing at once
    time.sleep(0.005)  # sleep-ok: a poll for the start marker
for i in range(40):
    with connect(path) as con:
        con.execute(
            "INSERT INTO attempts (tag, plan, task, number, agent, outcome) "
            "VALUES (?, ?, ?, 1, 'claude', 'MERGED')",
            (f"{plan}/t{i}/1/0", plan, f"t{i}"),
        )
"""


def test_runs_of_different_plans_write_at_once(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "forge")
    path = history.path_of(state)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(path),
                plan,
                str(tmp_path / f"{plan}.ready"),
                str(go),
            ]
        )
        for plan in ("a", "b")
    ]
    wait_for(lambda: all((tmp_path / f"{p}.ready").exists() for p in ("a", "b")))
    go.touch()
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert con.execute("SELECT plan, count(*) FROM attempts GROUP BY plan").fetchall() == [
        ("a", 40),
        ("b", 40),
    ]
    con.close()
    assert len(history.rows(state, plan="a")) == 40


def test_no_history_reads_as_none(tmp_path: Path) -> None:
    assert history.rows(StateDir(tmp_path / "forge")) == []


def test_an_infra_attempts_kind_is_the_one_it_ended_with(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer's missing binary: the reason leads with `review:`, the kind
    recorded (in the state and the history) is what kept it from running."""
    monkeypatch.setenv("FORGE_INFRA_BACKOFF", "0.05")
    worker = f"{sys.executable} {FAKES}/agent_edit.py $FORGE_TASK.txt"
    body = (
        'agent = "worker"\nreview = "rev"\n'
        f"[agents.worker]\ncommand = {json.dumps(['bash', '-c', worker])}\n"
        f"[agents.rev]\ncommand = {json.dumps(['no-such-reviewer-binary'])}\n"
        '[[task]]\nid = "t"\nprompt = "write t"\nfiles = ["t.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [only] = state(repo)["tasks"]["t"]["attempts"]
    assert str(only["reason"]).startswith("review: binary-missing")
    assert only["infra_kind"] == "binary-missing"
    con = sqlite3.connect(repo / ".git" / "forge" / "private" / "history.sqlite")
    rows = con.execute("SELECT outcome, infra_kind FROM attempts").fetchall()
    con.close()
    assert rows == [("INFRA", "binary-missing")]


def test_a_history_an_older_forge_kept_is_moved_out_of_every_commands_sight(
    repo: Path, tmp_path: Path
) -> None:
    """An older forge kept the history beside the plans (`.git/forge/history.sqlite`):
    the first forge to open it moves it, with its write-ahead log, into the private
    folder the sandbox and the box cover, and a run goes on writing it there."""
    state_dir = StateDir.for_common_dir(repo / ".git")
    old = state_dir.root / "history.sqlite"
    old.parent.mkdir(parents=True, exist_ok=True)
    with history.connect(old) as con:
        con.execute(
            "INSERT INTO attempts (tag, plan, task, number, agent, outcome) "
            "VALUES ('old/t/1/1', 'old', 't', 1, 'run', 'MERGED')"
        )
    cp = plan_and_run(
        repo,
        write_plan(tmp_path, '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n'),
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not old.exists()
    con = sqlite3.connect(state_dir.private_dir / "history.sqlite")
    plans = sorted(r[0] for r in con.execute("SELECT plan FROM attempts"))
    con.close()
    assert plans == ["old", "p"]
