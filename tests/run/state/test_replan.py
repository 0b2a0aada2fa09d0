"""`forge plan` while the plan runs: the running `forge run` takes the new version up
at its next dispatch; changes to work under way are refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.gitkit import run_forge
from helpers.runkit import merge_count, spawn_forge, state, statuses, wait_for, write_plan


def _task(tid: str, *, deps: str = "[]", wait_for: Path | None = None, word: str = "") -> str:
    wait = f"while [ ! -f {wait_for} ]; do sleep 0.02; done; " if wait_for else ""
    return (
        f'[[task]]\nid = "{tid}"\nfiles = ["{tid}.txt"]\ndeps = {deps}\n'
        f'run = "{wait}echo {tid}{word} > {tid}.txt"\n'
    )


def _running(repo: Path, tid: str) -> bool:
    live = repo / ".git/forge/plans/p/live.json"
    try:
        return tid in json.loads(live.read_text())["running"]
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def _start(repo: Path, plan: Path, task: str) -> subprocess.Popen[str]:
    cp = run_forge(repo, "plan", str(plan))
    assert cp.returncode == 0, cp.stderr
    run = spawn_forge(repo, "run")
    wait_for(lambda: _running(repo, task), what=f"{task} to start")
    return run


def test_a_task_added_while_the_run_waits_lands_in_the_same_run(repo: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    first = _task("a", wait_for=go) + _task("later", deps='["a"]')
    plan = write_plan(tmp_path, first)
    run = _start(repo, plan, "a")
    try:
        # `b` depends on the running `a`; `later`, not started, leaves the plan
        write_plan(tmp_path, _task("a", wait_for=go) + _task("b", deps='["a"]'))
        cp = run_forge(repo, "plan", str(plan))
        assert cp.returncode == 0, cp.stderr
        assert f"the running forge run (pid {run.pid}) takes up: added b; dropped later" in (
            cp.stdout
        )
        wait_for(lambda: "b" in statuses(repo), what="the run to take up b")
        assert "later" not in statuses(repo)
        # the run lock stayed with the run: no second runner, no other holder
        owner = json.loads((repo / ".git/forge/plans/p/owner.json").read_text())
        assert owner["pid"] == run.pid and owner["command"] == "forge run"
        go.touch()
        out, err = run.communicate(timeout=60)
    finally:
        go.touch()
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, out + err
    assert "plan 'p' recorded again; taking up: added b; dropped later" in err
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert merge_count(repo, "b") == 1
    assert [
        t["id"]
        for t in json.loads((repo / ".git/forge/plans/p/plan.json").read_text())["plan"]["tasks"]
    ] == ["a", "b"]
    assert state(repo)["tasks"]["b"]["base"] is not None


@pytest.mark.slow
def test_a_change_to_a_running_task_is_refused_and_nothing_recorded(
    repo: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    plan = write_plan(tmp_path, _task("a", wait_for=go) + _task("c"))
    run = _start(repo, plan, "a")
    record = repo / ".git/forge/plans/p/plan.json"
    try:
        before = record.read_bytes()
        write_plan(tmp_path, _task("a", wait_for=go, word="-changed") + _task("c") + _task("d"))
        cp = run_forge(repo, "plan", str(plan))
        assert cp.returncode == 2, cp.stdout + cp.stderr
        assert "Traceback" not in cp.stderr
        assert (
            f"forge: task 'a' is running, so it cannot be changed while the running forge run "
            f"(pid {run.pid}) runs the plan" in cp.stderr
        )
        assert "`forge retry a --plan p --fresh`" in cp.stderr
        assert "nothing recorded" in cp.stderr
        assert record.read_bytes() == before
        # so is a change to a merged task, and the removal of one
        wait_for(lambda: statuses(repo).get("c") == "MERGED", what="c to merge")
        write_plan(tmp_path, _task("a", wait_for=go) + _task("c", word="-changed"))
        cp = run_forge(repo, "plan", str(plan))
        assert cp.returncode == 2 and "task 'c' has merged, so it cannot be changed" in cp.stderr
        write_plan(tmp_path, _task("a", wait_for=go))
        cp = run_forge(repo, "plan", str(plan))
        assert cp.returncode == 2 and "task 'c' has merged, so it cannot be removed" in cp.stderr
        assert record.read_bytes() == before
        # a change to the plan's settings is refused too
        write_plan(tmp_path, "max_parallel = 3\n" + _task("a", wait_for=go) + _task("c"))
        cp = run_forge(repo, "plan", str(plan))
        assert cp.returncode == 2 and "`max_parallel` changed" in cp.stderr
        assert record.read_bytes() == before
        go.touch()
        out, err = run.communicate(timeout=60)
    finally:
        go.touch()
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, out + err
    assert "recorded again" not in err
    assert statuses(repo) == {"a": "MERGED", "c": "MERGED"}
    # once the run has ended, the change records as usual
    cp = run_forge(repo, "plan", str(plan))
    assert cp.returncode == 0, cp.stderr
    assert "takes up" not in cp.stdout


def test_a_version_recorded_after_the_last_start_waits_for_the_next_run(
    repo: Path, tmp_path: Path
) -> None:
    """The run is verifying: it starts nothing more, and says so to `forge plan`."""
    go = tmp_path / "go"
    # gate = "off": the verification runs once, after the last task (not in the gate)
    verify = f'gate = "off"\nverify = "while [ ! -f {go} ]; do sleep 0.02; done"\n'
    plan = write_plan(tmp_path, verify + _task("a"))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    live = repo / ".git/forge/plans/p/live.json"
    run = spawn_forge(repo, "run")
    try:

        def closed() -> bool:
            try:
                data = json.loads(live.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                return False
            return bool(data["pid"] == run.pid and data["closed"])

        wait_for(closed, what="the run to stop dispatching")
        write_plan(tmp_path, verify + _task("a") + _task("b"))
        cp = run_forge(repo, "plan", "--json", str(plan))
        assert cp.returncode == 0, cp.stderr
        assert json.loads(cp.stdout)["running"] == {
            "pid": run.pid,
            "takes_up": False,
            "added": ["b"],
            "dropped": [],
            "changed": [],
        }
        go.touch()
        out, err = run.communicate(timeout=60)
    finally:
        go.touch()
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, out + err
    assert statuses(repo) == {"a": "MERGED"}
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
