"""A blame the gate laid on a flaky test's word, given back.

The gate blames a task when a verification fails with its change and passes
without it. When forge later learns that every test that failed then is
quarantined (flaky on evidence: it passed and failed on one tree; or by a
person's or the team's word), that failure was no evidence:
the task's blame is cleared. Its attempt is given back (the task is QUEUED with
the same change, so the gate verifies that change again and no new attempt is
made), and the task's warnings say why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from forge.git.repo import Repository
from forge.plan.repo_config import VerifyConfig
from forge.run.attempt.messages import GOES_AGAIN
from forge.run.state import events as ev
from forge.run.state.records import by_gate
from forge.run.state.run_state import RunState, Status, TaskState
from forge.verify.quarantine import quarantined
from forge.verify.records import VerifyRecord


def _excused(
    repo: Repository, config: VerifyConfig | None, failures: list[tuple[str, str]]
) -> bool:
    """Whether every failing test, (lane, test), is quarantined now (a failure
    that names no test is never excused; with `quarantine = "off"` a flaky test
    still blames)."""
    if not failures or any(not test for _lane, test in failures):
        return False
    by_lane: dict[str, set[str]] = {}
    for lane, test in failures:
        by_lane.setdefault(lane, set()).add(test)
    return all(tests <= quarantined(repo, config, lane, tests) for lane, tests in by_lane.items())


def excused(repo: Repository, config: VerifyConfig | None, record: VerifyRecord) -> bool:
    """Whether the failing verification `record` blames nobody after all."""
    return _excused(repo, config, [(f.lane, f.test) for f in record.failures])


def clear(
    repo: Repository,
    state: RunState,
    config: VerifyConfig | None,
    record: Callable[[ev.Event], None],
    *,
    logs: Path | None = None,
) -> list[str]:
    """Give back every blame of `state` whose failing tests are now known flaky: the
    tasks QUEUED again with their change (the ids, in plan order), each change
    recorded (`record`). `logs`: the plan's logs folder, where each attempt's own log is. The
    caller holds the state's lock and saves it."""
    cleared = []
    for tid, ts in state.tasks.items():
        if _blamed_by_flake(repo, config, ts):
            for event in _give_back(ts, logs):
                record(event)
            cleared.append(tid)
    return cleared


def _blamed_by_flake(repo: Repository, config: VerifyConfig | None, ts: TaskState) -> bool:
    last = ts.last
    if ts.status != Status.FAILED or last is None or last.commit is None:
        return False
    if not by_gate(last.feedback_source) or not last.failures:
        return False
    return _excused(repo, config, [(f.lane, f.test) for f in last.failures])


def _give_back(ts: TaskState, logs: Path | None) -> list[ev.Event]:
    last = ts.last
    assert last is not None
    tests = ", ".join(sorted({f.test for f in last.failures}))
    note = f"blame cleared: {tests} proved flaky; {GOES_AGAIN}"
    own = None if logs is None else _own_log(logs / ts.id / f"attempt-{last.number}")
    out: list[ev.Event] = [ev.Warned(ts.id, note), ev.GivenBack(ts.id, note, own)]
    blamed_on = ts.verified_by.commit if ts.verified_by is not None else None
    if blamed_on:
        out.append(ev.StepCleared(blamed_on, ts.id))
    return out


def _own_log(folder: Path) -> str | None:
    """The log the attempt wrote itself: its work's, else its check's."""
    for name in ("agent.log", "check.log", "setup.log"):
        if (folder / name).is_file():
            return str(folder / name)
    return None


def requeue(repo: Repository, plan: str, task: str) -> None:
    """A person's word that the gate's failure of `task` was not its change's (a
    broken or flaky environment): its blame is given back and the same change is
    QUEUED again, no new attempt made (a merge queue's re-queue). Refused, changing
    nothing, for a task the gate did not fail."""
    from forge.base.files import plan_lock
    from forge.errors import ForgeError
    from forge.run.state.store import StateStore

    with plan_lock(repo.state, plan, command="forge retry --requeue"):
        store = StateStore(repo.state, plan)
        state = store.load_existing()
        ts = state.tasks.get(task) if state is not None else None
        last = ts.last if ts is not None else None
        if state is None or ts is None or last is None:
            raise ForgeError(f"task '{task}' has not run: nothing to re-queue")
        if ts.status != Status.FAILED or not by_gate(last.feedback_source) or not last.commit:
            raise ForgeError(
                f"task '{task}' is {ts.status}, not failed by the gate's verification: only "
                f"such a task is re-queued; `forge retry {task} --plan {plan}` runs it again"
            )
        note = f"re-queued by a person: {GOES_AGAIN}"
        folder = repo.state.logs_dir(plan) / task / f"attempt-{last.number}"
        store.record(state, ev.Warned(task, note), ev.GivenBack(task, note, _own_log(folder)))
        store.save(state)
