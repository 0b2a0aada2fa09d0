"""Edge cases of runs: exhausted tasks after an interruption, tasks dropped from the
plan after a crash, and what `forge clean` must stop and remove."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import (
    kill9,
    plan_and_run,
    spawn_forge,
    state,
    statuses,
    tagged,
    wait_for,
    write_plan,
)

PY = shlex.quote(sys.executable)


def test_an_interrupted_task_with_nothing_stronger_left_ends_the_run(
    repo: Path, tmp_path: Path
) -> None:
    body = (
        'agent = "one"\nescalate_after = 1\n'
        '[agents.one]\ncommand = ["bash", "-c", "exit 1"]\nmodels = ["m"]\n'
        '[[task]]\nid = "x"\nprompt = "p"\nfiles = ["x.txt"]\n'
    )
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    # As if a later attempt had been interrupted: the policy still says split.
    path = repo / ".git/forge/plans/p/state.json"
    data = json.loads(path.read_text())
    data["tasks"]["x"]["status"] = "INTERRUPTED"
    path.write_text(json.dumps(data))
    cp = run_forge(repo, "run", timeout=30)  # must not spin forever
    assert cp.returncode == 3, cp.stdout + cp.stderr
    assert "split" in cp.stdout.lower()


def test_a_task_dropped_after_a_crash_is_stopped_and_its_work_kept(
    repo: Path, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    first = write_plan(
        tmp_path,
        f'[[task]]\nid = "a"\nrun = "echo partial > a.txt; touch {started}; sleep 600"\n'
        'files = ["a.txt"]\n',
    )
    assert run_forge(repo, "plan", str(first)).returncode == 0
    p = spawn_forge(repo, "run")
    wait_for(started.exists, what="a started")
    kill9(p)
    assert tagged("p/a/")
    first.write_text('name = "p"\n[[task]]\nid = "b"\nrun = "echo b > b.txt"\nfiles = ["b.txt"]\n')
    assert run_forge(repo, "plan", str(first)).returncode == 0
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not tagged("p/a/"), "the dropped task's agent outlived the recovery"
    assert statuses(repo) == {"b": "MERGED"}
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/forge/salvage/p/a/").split()
    assert refs and git(repo, "show", f"{refs[0]}:a.txt") == "partial"
    assert "no longer in the plan" in cp.stderr + cp.stdout


@pytest.mark.slow
def test_clean_stops_a_killed_runs_agent_and_removes_verification_checkouts(
    repo: Path, tmp_path: Path
) -> None:
    assert (
        plan_and_run(
            repo,
            write_plan(
                tmp_path,
                'verify = "true"\n[[task]]\nid = "v"\nrun = "echo v > v.txt"\nfiles = ["v.txt"]\n',
                name="q",
            ),
        ).returncode
        == 0
    )
    checkouts = Path(os.environ["FORGE_WORKTREES"]) / "repo" / ".verify"
    assert any(checkouts.glob("shared-*/verify"))
    started = tmp_path / "started"
    plan = write_plan(
        tmp_path,
        f'[[task]]\nid = "a"\nrun = "echo w > a.txt; touch {started}; sleep 600"\nfiles = ["a.txt"]\n',
    )
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    p = spawn_forge(repo, "run", "p")
    wait_for(started.exists, what="a started")
    kill9(p)
    assert tagged("p/a/")
    cp = run_forge(repo, "clean", "--all")
    assert cp.returncode == 0, cp.stderr
    assert not tagged("p/a/")
    assert not checkouts.exists()
    assert state(repo, "q")  # q's integration is not accepted: its state stays
