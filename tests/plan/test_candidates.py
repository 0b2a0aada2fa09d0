"""Best-of-N keys in a plan: read, checked like `agent`, shown in the wave table."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.gitkit import run_forge
from helpers.runkit import write_plan

from forge.plan.candidates import candidates_of
from forge.plan.load import load_plan

BODY = """\
candidates = ["claude:opus", "codex"]
[[task]]
id = "a"
prompt = "x"
files = ["a.txt"]

[[task]]
id = "b"
prompt = "x"
files = ["b.txt"]
best_of = 3
select = "best"
judge = "claude"

[[task]]
id = "c"
prompt = "x"
files = ["c.txt"]
best_of = 1
"""


def test_a_task_wins_over_the_plan_and_best_of_labels_each_instance(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, 'agent = "codex"\n' + BODY))
    a, b, c = plan.tasks
    assert [(x.label, x.spec, x.unit) for x in candidates_of(plan, a)] == [
        ("claude:opus", "claude:opus", "a+1"),
        ("codex", "codex", "a+2"),
    ]
    assert [x.label for x in candidates_of(plan, b)] == ["codex#1", "codex#2", "codex#3"]
    assert candidates_of(plan, c) == ()  # best_of = 1: one attempt at a time
    assert b.select == "best" and b.judge == "claude" and plan.select == "first"


def test_the_wave_table_shows_candidates(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, BODY)))
    assert cp.returncode == 0, cp.stderr
    assert "best of 2 (first): claude:opus, codex" in cp.stdout
    assert "best of 3 (best): claude#1, claude#2, claude#3" in cp.stdout
    data = json.loads(run_forge(repo, "plan", str(write_plan(tmp_path, BODY)), "--json").stdout)
    assert data["tasks"][0]["candidates"] == ["claude:opus", "codex"]


def test_an_unknown_candidate_names_the_file_and_line(repo: Path, tmp_path: Path) -> None:
    body = BODY.replace("best_of = 1\n", 'candidates = ["codex", "nope:x"]\n')
    path = write_plan(tmp_path, body)
    cp = run_forge(repo, "plan", str(path))
    assert cp.returncode == 2
    line = 1 + body.splitlines().index('candidates = ["codex", "nope:x"]') + 1
    assert cp.stderr.startswith(
        f"forge: {path}:{line}: task 'c': candidates 'nope:x': unknown agent"
    )
    assert len(cp.stderr.strip().splitlines()) == 1


def test_bad_values_are_plan_errors(repo: Path, tmp_path: Path) -> None:
    body = 'candidates = ["codex"]\nbest_of = 0\nselect = "fast"\n' + BODY.split("\n", 1)[1]
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 2
    assert "`candidates` must list two agent specs or more" in cp.stderr
    assert "`best_of` must be a whole number from 1 to 16, got 0" in cp.stderr
    assert '`select` must be "first" or "best", got \'fast\'' in cp.stderr
