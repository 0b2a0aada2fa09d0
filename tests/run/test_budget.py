"""Cost and the budget end to end: a fake agent that reports Claude-style JSON with
`total_cost_usd`; tokens priced from `[prices]` when a CLI reports no USD."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.gitkit import FAKES, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan

CLAUDE_LIKE = json.dumps([sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt", "--usage"])


def plan_body(n: int, *, budget: str | None = None, fmt: str = "claude") -> str:
    head = 'max_parallel = 1\nagent = "fake"\n'
    if budget is not None:
        head += f'budget = "{budget}"\n'
    head += f'[agents.fake]\ncommand = {CLAUDE_LIKE}\nusage_format = "{fmt}"\n'
    tasks = "".join(
        f'[[task]]\nid = "t{i}"\nprompt = "edit"\nfiles = ["t{i}.txt"]\n' for i in range(n)
    )
    return head + tasks


def test_the_budget_pauses_the_run_and_a_larger_one_resumes_it(repo: Path, tmp_path: Path) -> None:
    # Each attempt reports $0.0123: the third one takes the spend past $0.03.
    cp = plan_and_run(repo, write_plan(tmp_path, plan_body(5, budget="0.03 USD")))
    assert cp.returncode == 8, cp.stdout + cp.stderr
    assert list(statuses(repo).values()) == ["MERGED"] * 3 + ["PENDING"] * 2
    assert (
        "paused: budget: the plan has spent $0.04 of its 0.03 USD budget; raise `budget` "
        "in the plan or give `forge run --budget USD`" in cp.stdout
    )
    assert (
        "cost: $0.04, 300 in / 60 out tokens; $0.01 per landed task (budget 0.03 USD)" in cp.stdout
    )
    data = json.loads(run_forge(repo, "status", "--json").stdout)
    assert data["spend"]["usd"] == 0.0369 and data["budget_usd"] == 0.03
    assert "cost: $0.04" in run_forge(repo, "status").stdout
    # a budget given on the command line wins over the plan's
    cp = run_forge(repo, "run", "--budget", "$1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert set(statuses(repo).values()) == {"MERGED"}


def test_a_bad_budget_is_refused(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, plan_body(1, budget="lots"))))
    assert cp.returncode == 2 and "`budget`: a budget is an amount in USD" in cp.stderr
    cp = plan_and_run(repo, write_plan(tmp_path, plan_body(1)), "--budget", "-3")
    assert cp.returncode == 2
    assert cp.stderr.startswith("forge: --budget: a budget is an amount in USD")
    assert not (repo / ".git/forge/plans/p/state.json").exists()  # nothing ran


CODEX_LIKE = """\
import json, pathlib, os
pathlib.Path(os.environ["FORGE_TASK"] + ".txt").write_text("x")
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1000000, "output_tokens": 100000}}))
"""


def test_tokens_are_priced_from_the_table_and_forge_toml(repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "codexlike.py"
    script.write_text(CODEX_LIKE)
    argv = json.dumps([sys.executable, str(script)])
    body = (
        'agent = "cx:my-model"\n'
        f'[agents.cx]\ncommand = {argv}\nmodels = ["my-model"]\nusage_format = "codex"\n'
        '[[task]]\nid = "t0"\nprompt = "edit"\nfiles = ["t0.txt"]\n'
    )
    (repo / "forge.toml").write_text('[prices]\n"my-model" = { input = 2.0, output = 10.0 }\n')
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # 1M input at $2 + 0.1M output at $10
    assert "cost: $3.00, 1.0M in / 100.0k out tokens" in cp.stdout
    # The task's own figure is the summary's (one place computes both).
    task = json.loads(run_forge(repo, "status", "t0", "--json").stdout)
    assert task["cost_usd"] == 3.0 and task["history"][0]["cost_usd"] == 3.0
    (repo / "forge.toml").write_text("")
    out = run_forge(repo, "status").stdout
    # A price unknown is not zero.
    assert "cost: unknown for 1 attempt (1.0M in / 100.0k out tokens)" in out
    assert "$0.00" not in out
