"""A task that finds its work done, or cannot merge, says which other task changed
its files: the person deciding what to do next needs the other task's name."""

from __future__ import annotations

from pathlib import Path

from helpers.runkit import plan_and_run, state, write_plan


def test_no_changes_behind_a_landed_edit_names_that_task(repo: Path, tmp_path: Path) -> None:
    body = """
[[task]]
id = "first"
run = "echo same > x.txt"
files = ["x.txt"]

[[task]]
id = "second"
run = "echo same > x.txt"
files = ["x.txt"]
deps = ["first"]
"""
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    second = state(repo)["tasks"]["second"]
    assert second["status"] == "FAILED"
    assert second["reason"] == (
        "no changes (its files were last changed by landed task first: "
        "the change may be there already)"
    )


def test_a_conflict_names_the_file_and_the_other_task(repo: Path, tmp_path: Path) -> None:
    # Both declare a file of their own but (scope = "warn") both edit shared.txt.
    body = """
scope = "warn"
max_parallel = 2
verify = "true"
verify_reruns = 0
[[task]]
id = "a"
run = "echo a > shared.txt; echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
run = "echo b > shared.txt; echo b > b.txt"
files = ["b.txt"]
"""
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    tasks = state(repo)["tasks"]
    [lost] = [t for t in tasks.values() if t["status"] == "CONFLICT"]
    other = "b" if lost["id"] == "a" else "a"
    assert tasks[other]["status"] == "MERGED"
    assert lost["reason"] == (
        f"conflicts with integration in: shared.txt (changed by landed task {other})"
    )
