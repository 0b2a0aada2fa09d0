"""A person's retry of a task the gate blamed: the same change goes to the gate
again and is verified again; `--retry-failed` keeps the no-progress rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gitkit import run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan


def _plan(broken: Path) -> str:
    # Fails while the task's file is there and `broken` exists (outside the repo):
    # a failure the task did not cause, gone once `broken` is removed.
    return (
        f"verify = 'test ! -f x.txt || test ! -f {broken}'\nverify_reruns = 0\n"
        'gate = "queue"\n'
        '[[task]]\nid = "t"\nrun = "echo x > x.txt"\nfiles = ["x.txt"]\n'
    )


@pytest.mark.parametrize("fresh", [False, True])
def test_a_persons_retry_sends_a_blamed_change_to_the_gate_again(
    repo: Path, tmp_path: Path, fresh: bool
) -> None:
    broken = tmp_path / "broken"
    broken.write_text("")
    cp = plan_and_run(repo, write_plan(tmp_path, _plan(broken)))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert state(repo)["tasks"]["t"]["reason"].startswith("breaks verification")
    # A shell command makes the same change again: the hint leads with fixing it (a
    # plain retry would loop on the same failure) and keeps the retry for a failure
    # that was not the change's, as here.
    hint = next(line for line in cp.stdout.splitlines() if line.startswith("next: t"))
    assert "fix its `run` in " in hint and "`forge retry t --plan p --fresh`" in hint
    assert hint.endswith(
        "`forge retry t --plan p --requeue` when the failure was not its change's "
        "(a flaky or broken environment)"
    ), hint
    # Automatic retries keep the no-progress rule: the same change is not sent again.
    cp = run_forge(repo, "run", "--retry-failed", "1")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert state(repo)["tasks"]["t"]["reason"].startswith("no progress")
    broken.unlink()
    cp = run_forge(repo, "retry", "t", *(["--fresh"] if fresh else []))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"t": "MERGED"}
    assert "no progress" not in cp.stdout


def test_a_persons_retry_is_verified_again_not_answered_from_memory(
    repo: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.write_text("")
    assert plan_and_run(repo, write_plan(tmp_path, _plan(broken))).returncode == 5
    # Still broken: verified again, it fails again, and is blamed again by the gate.
    cp = run_forge(repo, "retry", "t")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    last = state(repo)["tasks"]["t"]["attempts"][-1]
    assert last["reason"].startswith("breaks verification"), last
    assert "was verified before" not in cp.stdout


def test_a_requeue_sends_the_same_change_to_the_gate_again_and_runs_nothing_else(
    repo: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.write_text("")
    ran = tmp_path / "ran"
    body = _plan(broken).replace('run = "echo x > x.txt"', f'run = "echo x > x.txt; echo >> {ran}"')
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    assert ran.read_text().count("\n") == 1
    still = run_forge(repo, "retry", "t", "--requeue")  # the environment is still broken
    assert still.returncode == 5, still.stdout + still.stderr
    broken.unlink()  # the environment mended
    cp = run_forge(repo, "retry", "t", "--requeue")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"t": "MERGED"}
    assert ran.read_text().count("\n") == 1  # its command never ran again
    ts = state(repo)["tasks"]["t"]
    assert [a["status"] for a in ts["attempts"]] == ["MERGED"]
    assert any(w.startswith("re-queued by a person") for w in ts["warnings"])
    refused = run_forge(repo, "retry", "t", "--requeue")
    assert refused.returncode == 2 and "already merged" in refused.stderr


def test_a_requeue_of_a_task_the_gate_did_not_fail_is_refused(repo: Path, tmp_path: Path) -> None:
    body = '[[task]]\nid = "t"\nrun = "exit 1"\nfiles = ["x.txt"]\n'
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    cp = run_forge(repo, "retry", "t", "--requeue")
    assert cp.returncode == 2 and cp.stdout == ""
    assert cp.stderr == (
        "forge: task 't' is FAILED, not failed by the gate's verification: only such a task "
        "is re-queued; `forge retry t --plan p` runs it again\n"
    )
