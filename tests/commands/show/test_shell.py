"""`forge shell TASK`: a person looks inside the worktree of a FAILED task (what its
agent left, uncommitted), or runs one command there; a task with no worktree, a
task that does not exist, and a plan that never ran are one line each."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers.gitkit import forge_cmd, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan


def test_a_failed_tasks_worktree_opens_with_what_it_left(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        '[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo half > a.txt; exit 3"\n'
        '[[task]]\nid = "b"\nfiles = ["b.txt"]\nrun = "echo done > b.txt"\n',
    )
    plan_and_run(repo, plan)
    assert statuses(repo) == {"a": "FAILED", "b": "MERGED"}
    cp = run_forge(repo, "shell", "a", "-c", 'cat a.txt; echo "$FORGE_TASK"; exit 7')
    assert cp.returncode == 7, cp.stderr
    assert cp.stdout == "half\na\n"
    shell = tmp_path / "shell.sh"  # the person's $SHELL, opened in the worktree
    shell.write_text('#!/bin/sh\necho "$PWD" = "$FORGE_SLOT"; cat a.txt\n')
    shell.chmod(0o755)
    env = {**os.environ, "SHELL": str(shell)}
    cp = subprocess.run(
        forge_cmd("shell", "a", "--plan", "p"), cwd=repo, env=env, capture_output=True, text=True
    )
    said, _, rest = cp.stdout.partition("\n")
    here, _, slot = said.partition(" = ")
    assert cp.returncode == 0 and here == slot and rest == "half\n", cp.stdout + cp.stderr

    merged = run_forge(repo, "shell", "b")
    assert merged.returncode == 2
    assert merged.stderr.strip().splitlines() == [
        "forge: task 'b' holds no worktree (its work has merged): nothing to open"
    ]
    missing = run_forge(repo, "shell", "zz", "--plan", "p")
    assert missing.returncode == 2 and "no task 'zz'" in missing.stderr
    assert "Traceback" not in missing.stderr + merged.stderr


def test_a_plan_that_never_ran_has_no_worktree_to_open(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, '[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "true"\n')
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "shell", "a")
    assert cp.returncode == 2
    assert "has not run yet" in cp.stderr and "Traceback" not in cp.stderr
