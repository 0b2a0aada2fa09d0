"""Costs that agree: the run's summary, `forge status --json`, the report and `forge
stats` give one cost per landed task (the agents' spend over the tasks agents
landed), written by one formatter; a figure nobody reported is n/a, never $0.00."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.gitkit import FAKES, run_forge
from helpers.runkit import plan_and_run, write_plan

MIXED = f"""
agent = "fake"
[agents.fake]
command = {json.dumps([sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt", "--usage"])}
usage_format = "claude"
[[task]]
id = "agent"
prompt = "edit"
files = ["agent.txt"]
[[task]]
id = "shell"
run = "echo s > shell.txt"
files = ["shell.txt"]
"""


def test_one_cost_per_landed_task_everywhere_with_a_shell_task_in_the_plan(
    repo: Path, tmp_path: Path
) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, MIXED))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # $0.0123 spent by the agent, one task landed by an agent (the shell task is free).
    assert "cost: $0.01, 100 in / 20 out tokens; $0.01 per landed task" in cp.stdout, cp.stdout
    spend = json.loads(run_forge(repo, "status", "--json").stdout)["spend"]
    assert (spend["landed"], spend["landed_by_agents"], spend["per_landed_usd"]) == (2, 1, 0.0123)
    stats = json.loads(run_forge(repo, "stats", "--json").stdout)
    assert stats["totals"]["cost_per_landed_usd"] == 0.0123
    rows = {r["agent"]: r for r in stats["rows"]}
    assert rows["shell"]["cost_per_landed_usd"] is None and rows["shell"]["landed"] == 1
    report = tmp_path / "r.html"
    assert run_forge(repo, "report", "-o", str(report)).returncode == 0
    assert "$0.01 per landed task" in report.read_text()


def test_a_cost_under_a_cent_reads_the_same_in_draft_and_stats() -> None:
    from forge.base.text import usd
    from forge.commands.draft import _usd

    assert _usd(0.00031, unpriced=False) == usd(0.00031) == "$0.00031"
