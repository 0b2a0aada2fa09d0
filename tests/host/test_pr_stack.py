"""`forge pr --per-task`: one pull request a landed task, stacked in landing order;
a failing check blames the first task whose parent passed it; once the bottom
one is merged, the next is retargeted onto the base."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.github import GitHubServer
from helpers.gitkit import git, run_forge
from helpers.plans import plan, shell
from helpers.runkit import plan_and_run, state, write_plan


def test_a_stack_of_pull_requests_blames_the_task_that_broke_a_check(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    body = plan(shell("a"), shell("b", deps=["a"]), shell("c", deps=["b"]), verify="true")
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 0
    landed = {tid: t["merged_commit"] for tid, t in state(repo)["tasks"].items()}
    script = hub.script
    script.checks = {"build": "failure"}
    script.checks_by_sha = {landed["a"]: {"build": "success"}}

    cp = run_forge(repo, "pr", "--per-task", "--json")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    stack = json.loads(cp.stdout)["stack"]
    assert [(e["task"], e["number"], e["base"]) for e in stack] == [
        ("a", 1, "main"),
        ("b", 2, "forge-stack/p/a"),
        ("c", 3, "forge-stack/p/b"),
    ]
    assert [script.head_of(f"forge-stack/p/{t}") for t in "abc"] == [landed[t] for t in "abc"]
    assert [script.pulls[n].base for n in (1, 2, 3)] == [
        "main",
        "forge-stack/p/a",
        "forge-stack/p/b",
    ]
    said = run_forge(repo, "pr", "--per-task")
    assert "FAIL hosted: build on b's pull request (its parent passed): task b" in said.stdout
    assert "task c" not in said.stdout.split("FAIL", 1)[1]
    status = run_forge(repo, "status", "p").stdout
    assert "stacked pull request of b: #2 open; checks: build failed" in status

    script.merge(script.pulls[1], "merge")  # a person merges the bottom one
    script.checks_by_sha = {}
    script.checks = {"build": "success"}
    cp = run_forge(repo, "pr", "--per-task")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert script.pulls[2].base == "main" and script.pulls[3].base == "forge-stack/p/b"
    assert "updated #2 b (on main)" in cp.stdout
    assert git(repo, "rev-parse", "forge/p-integration") == landed["c"]
