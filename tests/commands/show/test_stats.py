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
    # The summary says what a landed task cost (under a cent: not rounded to free).
    assert "$0.0082 per landed task" in cp.stdout
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
    # A plan nobody recorded is a mistake, not an empty table.
    other = run_forge(repo, "stats", "--plan", "other")
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr == "forge: no plan named 'other' is recorded (recorded: p)\n"
    # Any SQLite tool reads it.
    con = sqlite3.connect(repo / ".git" / "forge" / "private" / "history.sqlite")
    assert con.execute("SELECT count(*) FROM attempts WHERE landed").fetchone() == (3,)
    con.close()


def test_stats_refuse_a_since_that_is_no_duration(repo: Path) -> None:
    cp = run_forge(repo, "stats", "--since", "lately")
    assert cp.returncode == 2 and cp.stderr.startswith("forge: --since 'lately'")


def test_stats_count_shell_tasks_with_no_cost(repo: Path, tmp_path: Path) -> None:
    body = "".join(
        f'[[task]]\nid = "s{i}"\nrun = "echo {i} > s{i}.txt"\nfiles = ["s{i}.txt"]\n'
        for i in range(3)
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body, name="tidy"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "$0.00" not in cp.stdout and "n/a per landed task" in cp.stdout
    text = run_forge(repo, "stats", "--plan", "tidy").stdout
    assert "no attempts recorded yet" not in text
    shell = next(line for line in text.splitlines() if line.startswith("shell"))
    assert shell.split()[1:3] == ["3", "3"] and "n/a" in shell and "$" not in shell
    data = json.loads(run_forge(repo, "stats", "--plan", "tidy", "--json").stdout)
    (row,) = data["rows"]
    assert (row["agent"], row["attempts"], row["landed"]) == ("shell", 3, 3)
    assert row["cost_usd"] is None and row["cost_per_landed_usd"] is None
    assert data["totals"]["cost_usd"] is None and data["totals"]["attempts"] == 3


def test_a_model_no_cli_reported_is_not_checked(repo: Path, tmp_path: Path) -> None:
    # Codex's JSON names no model: its row says "not checked", not 0 mismatches.
    replay = [sys.executable, str(FAKES / "agent_replay.py"), "codex-success.jsonl"]
    argv = [*replay, "--exit", "0", "--touch", "t.txt"]
    body = f'agent = "codex"\n[agents.codex]\ncommand = {json.dumps(argv)}\n'
    body += '[[task]]\nid = "t"\nprompt = "edit"\nfiles = ["t.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (row,) = json.loads(run_forge(repo, "stats", "--json").stdout)["rows"]
    assert row["model_mismatches"] is None
    assert "not checked" in run_forge(repo, "stats").stdout
