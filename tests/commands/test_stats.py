"""`forge stats` from the attempts history, through the CLI, with fake agents."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from helpers.gitkit import FAKES, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan


def _agents(tmp_path: Path) -> str:
    good = [sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt", "--usage"]
    flaky = [sys.executable, str(FAKES / "agent_flaky.py"), "1", str(tmp_path / "n"), "{task}.txt"]
    bad = [sys.executable, str(FAKES / "agent_edit.py"), "bad.txt"]
    return (
        f'[agents.good]\ncommand = {json.dumps(good)}\nusage_format = "claude"\n'
        f"[agents.flaky]\ncommand = {json.dumps(flaky)}\n"
        f"[agents.bad]\ncommand = {json.dumps(bad)}\n"
    )


def _task(tid: str, agent: str, files: str | None = None) -> str:
    return (
        f'[[task]]\nid = "{tid}"\nprompt = "edit"\nagent = "{agent}"\n'
        f'files = ["{files or tid + ".txt"}"]\n'
    )


def test_stats_count_the_attempts_run(repo: Path, tmp_path: Path) -> None:
    empty = run_forge(repo, "stats")
    assert empty.returncode == 0 and "no attempts recorded yet" in empty.stdout
    body = 'max_parallel = 1\nverify = "test ! -e bad.txt"\n' + _agents(tmp_path)
    body += _task("t0", "good") + _task("t1", "good") + _task("t2", "flaky")
    body += _task("t3", "bad", "bad.txt")
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--retry-failed", "1")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"t0": "MERGED", "t1": "MERGED", "t2": "MERGED", "t3": "FAILED"}
    # The summary says what a landed task cost.
    assert "$0.01 per landed task" in cp.stdout
    data = json.loads(run_forge(repo, "stats", "--json").stdout)
    rows = {r["agent"]: r for r in data["rows"]}
    assert rows["good"]["attempts"] == 2 and rows["good"]["landed"] == 2
    assert rows["good"]["cost_usd"] == 0.0246 and rows["good"]["cost_per_landed_usd"] == 0.0123
    assert rows["good"]["median_seconds_to_land"] > 0
    assert rows["flaky"]["attempts"] == 2 and rows["flaky"]["landed"] == 1
    assert rows["flaky"]["land_rate"] == 0.5
    # The gate blamed t3's first attempt; its retry makes the same change, which is a
    # culprit again or, when nothing landed in between, stopped before the gate as no
    # progress. Either way nothing of it landed.
    assert rows["bad"]["landed"] == 0 and rows["bad"]["attempts"] == 2
    assert rows["bad"]["culprits"] in (1, 2)
    assert rows["bad"]["cost_per_landed_usd"] is None
    assert data["totals"]["attempts"] == 6 and data["totals"]["landed"] == 3
    text = run_forge(repo, "stats", "--plan", "p", "--since", "7d").stdout
    assert "good" in text and "$0.01" in text and "total" in text
    assert "no attempts" in run_forge(repo, "stats", "--plan", "other").stdout
    # Any SQLite tool reads it.
    con = sqlite3.connect(repo / ".git" / "forge" / "history.sqlite")
    assert con.execute("SELECT count(*) FROM attempts WHERE landed").fetchone() == (3,)
    con.close()


def test_stats_refuse_a_since_that_is_no_duration(repo: Path) -> None:
    cp = run_forge(repo, "stats", "--since", "lately")
    assert cp.returncode == 2 and cp.stderr.startswith("forge: --since 'lately'")
