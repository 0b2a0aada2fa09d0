"""Plans and integration branches that change between runs are reconciled: a task
whose merge is gone runs again, and a changed plan is explained before it is recorded."""

from __future__ import annotations

from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import merge_count, plan_and_run, state, statuses, write_plan

# (`a` lands through the gate before `b` runs: a verification needing b.txt would
# never let it land)
TWO = """
max_parallel = 1
verify = "test -f a.txt"
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


def test_recording_a_changed_plan_says_what_it_means(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, TWO)
    assert plan_and_run(repo, plan).returncode == 0
    changed = TWO.replace('run = "echo a > a.txt"', 'run = "echo A > a.txt"')
    dropped = changed[: changed.index('[[task]]\nid = "b"')]
    plan.write_text('name = "p"\n' + dropped)
    cp = run_forge(repo, "plan", str(plan))
    assert cp.returncode == 0, cp.stderr
    assert (
        "forge: note: task `b` merged and is no longer in the plan: its work stays on "
        "forge/p-integration (`forge clean p` and run again to drop it)"
    ) in cp.stderr
    assert (
        "forge: note: task `a` changed since it merged: its old work stays on "
        "forge/p-integration (`forge retry a --plan p --fresh` runs it again on the current head)"
    ) in cp.stderr


def test_retry_fresh_runs_a_merged_task_whose_definition_changed(
    repo: Path, tmp_path: Path
) -> None:
    plan = write_plan(tmp_path, TWO)
    assert plan_and_run(repo, plan).returncode == 0
    plan.write_text(plan.read_text().replace('"echo a > a.txt"', '"echo A > a.txt"'))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "retry", "a")
    assert cp.returncode == 2
    assert "`forge retry a --plan p --fresh` runs it again" in cp.stderr
    cp = run_forge(repo, "retry", "a", "--fresh")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert git(repo, "show", "forge/p-integration:a.txt") == "A"
    assert merge_count(repo, "a") == 2
    cp = run_forge(repo, "retry", "a", "--fresh")  # merged under this definition now
    assert cp.returncode == 2 and "already merged" in cp.stderr


def test_an_integration_branch_forge_did_not_make_is_refused(repo: Path, tmp_path: Path) -> None:
    (repo / "mine.txt").write_text("my own work\n")
    git(repo, "add", "mine.txt")
    git(repo, "commit", "-qm", "mine")
    git(repo, "branch", "forge/p-integration")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, TWO)))
    assert cp.returncode == 2
    assert "a branch `forge/p-integration` exists that forge did not create" in cp.stderr
    assert "git branch -m forge/p-integration" in cp.stderr
    assert not (repo / ".git/forge/plans/p/plan.json").exists()


def test_run_refuses_an_integration_branch_made_after_recording(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, TWO))).returncode == 0
    git(repo, "branch", "forge/p-integration")
    before = git(repo, "rev-parse", "forge/p-integration")
    cp = run_forge(repo, "run")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "forge did not create" in cp.stderr
    assert git(repo, "rev-parse", "forge/p-integration") == before
    assert not (repo / ".git/forge/plans/p/state.json").exists()
