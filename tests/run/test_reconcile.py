"""Plans and integration branches that change between runs are reconciled: a task
whose merge is gone runs again, and a changed plan is explained before it is recorded."""

from __future__ import annotations

from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import merge_count, plan_and_run, state, statuses, write_plan

TWO = """
max_parallel = 1
verify = "test -f a.txt && test -f b.txt"
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
run = "echo b > b.txt"
files = ["b.txt"]
deps = ["a"]
"""


def test_a_rewound_integration_branch_runs_its_tasks_again(repo: Path, tmp_path: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    assert plan_and_run(repo, write_plan(tmp_path, TWO)).returncode == 0
    git(repo, "update-ref", "refs/heads/forge/p-integration", base)  # rewound by hand
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "is no longer on forge/p-integration" in cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    tree = set(git(repo, "ls-tree", "--name-only", "forge/p-integration").split())
    assert {"a.txt", "b.txt"} <= tree
    assert merge_count(repo, "a") == 1 and merge_count(repo, "b") == 1
    assert state(repo)["verification"]["verdict"] == "PASS"


def test_only_the_tasks_whose_merge_is_gone_run_again(repo: Path, tmp_path: Path) -> None:
    assert plan_and_run(repo, write_plan(tmp_path, TWO)).returncode == 0
    a_merge = state(repo)["tasks"]["a"]["merged_commit"]
    git(repo, "update-ref", "refs/heads/forge/p-integration", a_merge)  # b's merge dropped
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    tasks = state(repo)["tasks"]
    assert len(tasks["a"]["attempts"]) == 1 and len(tasks["b"]["attempts"]) == 2
    assert tasks["a"]["merged_commit"] == a_merge
