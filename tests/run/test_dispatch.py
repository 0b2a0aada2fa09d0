"""Dispatch: dependencies, file overlap, priority, slots and setup, on real runs."""

from __future__ import annotations

from pathlib import Path

from helpers.runkit import plan_and_run, state, statuses, write_plan


def _events(log: Path) -> list[tuple[str, str]]:
    return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]


def _task(
    tid: str, log: Path, files: str, *, deps: str = "[]", wait_for: Path | None = None
) -> str:
    wait = f"while [ ! -f {wait_for} ]; do sleep 0.02; done; " if wait_for else ""
    return (
        f'[[task]]\nid = "{tid}"\nfiles = {files}\ndeps = {deps}\n'
        f'run = "echo start {tid} >> {log}; {wait}echo {tid} >> {tid}.txt; echo end {tid} >> {log}"\n'
    )


def test_overlapping_tasks_never_run_at_once(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "events"
    body = "max_parallel = 4\n" + "".join(
        _task(t, log, '["shared/"]' if t != "c" else '["shared/c.txt"]') for t in "abc"
    )
    body = (
        body.replace("echo a >> a.txt", "echo a >> shared/a.txt")
        .replace("echo b >> b.txt", "echo b >> shared/b.txt")
        .replace("echo c >> c.txt", "echo c >> shared/c.txt")
    )
    body = body.replace('run = "echo start', 'run = "mkdir -p shared; echo start')
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    events = _events(log)
    running: set[str] = set()
    for kind, tid in events:
        if kind == "start":
            assert not running, f"{tid} started while {running} ran: {events}"
            running.add(tid)
        else:
            running.discard(tid)


def test_no_barrier_between_waves(repo: Path, tmp_path: Path) -> None:
    """`b` (wave 2, after `a`) starts while the slow wave-1 task `slow` still runs."""
    log, go = tmp_path / "events", tmp_path / "go"
    body = (
        "max_parallel = 3\n"
        + _task("slow", log, '["slow.txt"]', wait_for=go)
        + _task("a", log, '["a.txt"]')
        + _task("b", log, '["b.txt"]', deps='["a"]').replace(
            "echo end b >>", f"touch {go}; echo end b >>"
        )
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr  # `slow` waits for `b`: no deadlock
    events = _events(log)
    assert events.index(("start", "b")) < events.index(("end", "slow"))


def test_longest_critical_path_goes_first(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "events"
    body = (
        "max_parallel = 1\n"
        + _task("leaf", log, '["leaf.txt"]')
        + _task("root", log, '["root.txt"]')
        + _task("mid", log, '["mid.txt"]', deps='["root"]')
        + _task("top", log, '["top.txt"]', deps='["mid"]')
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    starts = [tid for kind, tid in _events(log) if kind == "start"]
    # root (chain of 3) and mid (2) beat leaf (1); leaf and top tie: plan order
    assert starts == ["root", "mid", "leaf", "top"]


def test_setup_runs_once_per_slot_and_slots_are_reused(repo: Path, tmp_path: Path) -> None:
    log, setups = tmp_path / "events", tmp_path / "setups"
    body = f'max_parallel = 1\nsetup = "echo setup >> {setups}"\n' + "".join(
        _task(t, log, f'["{t}.txt"]') for t in ("one", "two", "three")
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert setups.read_text().splitlines() == ["setup"]
    assert len(state(repo)["slots"]) == 1


def test_failing_setup_fails_the_task_with_its_log(repo: Path, tmp_path: Path) -> None:
    body = 'setup = "echo cannot-install >&2; exit 4"\n' + _task("a", tmp_path / "e", '["a.txt"]')
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    st = state(repo)["tasks"]["a"]
    assert st["status"] == "FAILED" and "setup failed" in st["reason"]
    assert "cannot-install" in st["reason"]
    assert statuses(repo) == {"a": "FAILED"}
