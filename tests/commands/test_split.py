"""`forge split PLAN --tasks a,b --into NEW`: unmerged tasks move to a plan of their own."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import spawn_forge, statuses, wait_for
from helpers.snapshot import snapshot

from forge.errors import ForgeError
from forge.plan.edit import pieces, split_text

PLAN = """\
name = "p"
# the plan's own comment
max_parallel = 2

[[task]]
id = "base"
files = ["base.txt"]
run = "echo base > base.txt"

# the stubborn one: needs {flag}
[[task]]
id = "stuck"
files = ["stuck.txt"]
deps = [
  "base",
]
run = "test -f {flag} && cat base.txt > stuck.txt"

[[task]]
id = "after"  # waits for stuck
files = ["after.txt"]
deps = ["stuck"]
run = "echo after > after.txt"

[[task]]
id = "other"
files = ["other.txt"]
run = "echo other > other.txt"
"""


def test_split_then_both_plans_run(repo: Path, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    plans = tmp_path / "plans"
    plans.mkdir()
    path = plans / "p.toml"
    path.write_text(PLAN.format(flag=flag))
    assert run_forge(repo, "plan", str(path)).returncode == 0
    cp = run_forge(repo, "run", "p")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {
        "base": "MERGED",
        "stuck": "FAILED",
        "after": "BLOCKED",
        "other": "MERGED",
    }

    before, text = snapshot(repo), path.read_text()
    cp = run_forge(repo, "split", "p", "--tasks", "stuck", "--into", "q", "--dry-run")
    assert cp.returncode == 2
    assert "task 'after' stays in plan 'p' but depends on 'stuck'" in cp.stderr
    cp = run_forge(repo, "split", "p", "--tasks", "base", "--into", "q")
    assert cp.returncode == 2 and "task 'base' has merged into plan 'p'" in cp.stderr
    cp = run_forge(repo, "split", "p", "--tasks", "stuck,after", "--into", "q", "--dry-run")
    assert cp.returncode == 0, cp.stderr
    assert "plan p:" in cp.stdout and "plan q:" in cp.stdout
    assert "stuck: no longer depends on base (merged in plan 'p')" in cp.stdout
    assert "dry run: nothing was written" in cp.stdout
    assert snapshot(repo) == before and path.read_text() == text
    assert sorted(p.name for p in plans.iterdir()) == ["p.toml"]

    cp = run_forge(repo, "split", "p", "--tasks", "stuck,after", "--into", "q")
    assert cp.returncode == 0, cp.stderr
    assert "moved stuck, after from plan 'p' into plan 'q'" in cp.stdout
    old, new = path.read_text(), (plans / "q.toml").read_text()
    # the old file keeps its comments; the moved task takes the comment above it along
    assert "# the plan's own comment" in old and 'id = "stuck"' not in old
    assert "# the stubborn one" in new and 'id = "after"  # waits for stuck' in new
    head = git(repo, "rev-parse", "forge/p-integration")
    data = tomllib.loads(new)
    assert data["name"] == "q" and data["base"] == head and data["max_parallel"] == 2
    assert [t["id"] for t in data["task"]] == ["stuck", "after"]
    assert data["task"][0]["deps"] == []
    recorded = json.loads((repo / ".git/forge/plans/q/plan.json").read_text())
    assert recorded["base_commit"] == head
    assert statuses(repo) == {"base": "MERGED", "other": "MERGED"}

    flag.touch()
    cp = run_forge(repo, "run", "q")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo, "q") == {"stuck": "MERGED", "after": "MERGED"}
    # stuck read base.txt: its base was the old plan's integration head
    assert git(repo, "show", "forge/q-integration:stuck.txt") == "base"
    cp = run_forge(repo, "run", "p")
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_split_is_refused_while_the_plan_runs(repo: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "p"\n[[task]]\nid = "a"\nfiles = ["a.txt"]\n'
        f'run = "while [ ! -f {go} ]; do sleep 0.02; done; echo a > a.txt"\n'
        '[[task]]\nid = "b"\nfiles = ["b.txt"]\ndeps = ["a"]\nrun = "echo b > b.txt"\n'
    )
    assert run_forge(repo, "plan", str(path)).returncode == 0
    run = spawn_forge(repo, "run")
    try:
        state = repo / ".git/forge/plans/p/state.json"
        wait_for(lambda: state.exists() and statuses(repo).get("a") == "RUNNING", what="a to start")
        text = path.read_text()
        cp = run_forge(repo, "split", "p", "--tasks", "b", "--into", "q")
        assert cp.returncode == 2, cp.stderr
        assert f"plan 'p' is busy: pid {run.pid} (forge run)" in cp.stderr
        assert path.read_text() == text and not (tmp_path / "q.toml").exists()
    finally:
        go.touch()
        run.communicate(timeout=60)
    assert run.returncode == 0


def test_pieces_keep_sub_tables_and_refuse_what_they_cannot_cut() -> None:
    text = (
        'name = "p"\n[[task]]\nid = "a"\nfiles = ["a"]\nrun = "x"\n'
        '[[task]]\nid = "b"\nfiles = ["b"]\nrun = "y"\n[verify]\ncommand = "true"\n'
    )
    assert [(p.task, p.table) for p in pieces(text)] == [
        (None, ""),
        ("a", "task"),
        ("b", "task"),
        (None, "verify"),
    ]
    old, new = split_text(text, ["b"], new_name="q", new_base="main", base_note="n", new_deps={})
    assert tomllib.loads(old)["verify"] == {"command": "true"}
    assert tomllib.loads(new)["verify"] == {"command": "true"}
    assert [t["id"] for t in tomllib.loads(new)["task"]] == ["b"]
    # a header-like line inside a multi-line string cannot be cut by its text
    tricky = text.replace('run = "y"', 'run = """\n[[task]]\n"""')
    with pytest.raises(ForgeError, match="cannot move the tasks out of the plan file safely"):
        split_text(tricky, ["a"], new_name="q", new_base="main", base_note="n", new_deps={})
