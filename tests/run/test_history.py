"""The attempts history: concurrent writers (runs of different plans) lose nothing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers.runkit import wait_for

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
