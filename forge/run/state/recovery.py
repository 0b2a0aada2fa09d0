"""Crash recovery: what a run finds when it starts after a runner that is gone.

A task left RUNNING by a dead runner: its leftover processes are stopped, uncommitted
work in its worktree is committed to a salvage ref (named), and it becomes
INTERRUPTED, or MERGED if its work had already reached integration (a run killed
between `update-ref` and its state write): nothing is merged twice.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from forge.base import procgroup
from forge.base.liveness import start_time
from forge.git import worktrees
from forge.git.merge import is_ancestor
from forge.git.repo import Repository
from forge.plan.model import Plan
from forge.run.state import events as ev
from forge.run.state.run_state import RunState, Status, TaskState
from forge.run.state.store import StateStore
from forge.verify.records import VerifyRecord


def recover(
    repo: Repository,
    plan: Plan,
    state: RunState,
    store: StateStore,
    *,
    on_event: Callable[[str], None] = lambda _m: None,
) -> list[str]:
    notes: list[str] = []
    for folder in {Path(slot.path).parent for slot in state.slots.values()}:
        sweep_salvage_indexes(folder)
    integration = repo.ref_value(state.integration)
    notes += _recover_landing(repo, plan, store, state, integration)
    if integration:
        notes += _forget_rewritten(repo, store, state, integration)
    for ts in state.tasks.values():
        for cts in ts.candidates.values():  # best-of-N: each candidate ran on its own
            if cts.status == Status.RUNNING:
                notes += _recover_running(repo, store, state, cts)
        if ts.status == Status.RUNNING:
            notes += _recover_running(repo, store, state, ts)
        if ts.status != Status.MERGED and integration and _landed(repo, ts, integration):
            task = plan.find_task(ts.id)
            definition = task.definition() if task else None
            store.record(state, ev.Merged(ts.id, integration, definition), later=True)
            notes.append(f"{ts.id}: its merge had landed before the crash; recorded as MERGED")
    for note in notes:
        on_event(note)
    store.save(state)
    return notes


def _recover_landing(
    repo: Repository, plan: Plan, store: StateStore, state: RunState, integration: str | None
) -> list[str]:
    """A run killed while the gate verified a batch: its tasks are still QUEUED (the
    next run verifies them again). Killed while landing one: the intent was written
    before the ref moved, so a ref that did move is recorded as the landing it was,
    and one that did not lands nothing."""
    landing = state.gate.landing if state.gate else None
    store.record(state, ev.GateRecorded(None), later=True)
    if not landing or not integration or not is_ancestor(repo, landing.to, integration):
        return []
    notes = []
    for tid, commit in landing.tasks.items():
        ts = state.tasks.get(tid)
        if ts is None or ts.status == Status.MERGED:
            continue
        task = plan.find_task(tid)
        definition = task.definition() if task is not None else None
        store.record(state, ev.Merged(tid, commit, definition, landing.verified_by), later=True)
        notes.append(f"{tid}: its landing had happened before the crash; recorded as MERGED")
    if integration == landing.to and landing.verification:
        store.record(
            state, ev.VerificationRecorded(VerifyRecord.from_dict(landing.verification)), later=True
        )
    return notes


def _forget_rewritten(
    repo: Repository, store: StateStore, state: RunState, integration: str
) -> list[str]:
    """The integration branch was rewound or rewritten by hand: a task whose merge is
    no longer on it does not hold its work there, so it runs again instead of
    counting as merged (and the next verification judging a tree without it)."""
    notes = []
    branch = state.integration.removeprefix("refs/heads/")
    for ts in state.tasks.values():
        if ts.status != Status.MERGED or not ts.merged_commit:
            continue
        if is_ancestor(repo, ts.merged_commit, integration):
            continue
        why = f"its merge {ts.merged_commit[:12]} is no longer on {branch} (rewritten)"
        store.record(state, ev.Reopened(ts.id, why), later=True)
        notes.append(f"{ts.id}: {ts.reason}; it runs again")
    return notes


SALVAGE_INDEX_PREFIX = ".forge-salvage-index-"


def sweep_salvage_indexes(folder: Path) -> list[Path]:
    """Remove the temporary index files of salvages whose process is gone (killed
    mid-salvage); one of a live process stays. Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = [e for e in folder.iterdir() if e.name.startswith(SALVAGE_INDEX_PREFIX)]
    except OSError:
        return removed
    for entry in entries:
        # .forge-salvage-index-<pid>-<random>
        pid = entry.name[len(SALVAGE_INDEX_PREFIX) :].partition("-")[0].partition(".")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or start_time(int(pid)) is not None:
            continue
        with contextlib.suppress(FileNotFoundError):
            entry.unlink()
            removed.append(entry)
    return removed


def _landed(repo: Repository, ts: TaskState, integration: str) -> bool:
    last = ts.last
    if last is None or not last.commit or last.commit == ts.base:
        return False
    return is_ancestor(repo, last.commit, integration)


def stop_leftovers(store: StateStore, state: RunState, ts: TaskState, *, grace: float) -> int:
    """Stop what the task's last attempt left running; returns how many were alive.

    Processes are found by the tag in their environment, never by a recorded pgid
    alone: that number may belong to an unrelated process group by now."""
    last = ts.last
    if last is None or not last.tag:
        return 0
    pids = procgroup.find_tagged(last.tag)
    groups = set()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    for pgid in groups:
        procgroup.stop_group(pgid, grace=grace, tag=last.tag)
    store.record(state, ev.ProcessGroup(ts.id, last.number, None), later=True)
    return len(pids)


def drop_task(
    repo: Repository, plan: Plan, store: StateStore, state: RunState, tid: str
) -> list[str]:
    """A task removed from the plan since the last run: stop what it left running,
    save its uncommitted work under its own name, give its slot back clean."""
    notes = []
    ts = state.tasks[tid]
    stopped = stop_leftovers(store, state, ts, grace=repo.settings.grace)
    if stopped:
        notes.append(f"{tid} (no longer in the plan): stopped {stopped} leftover process(es)")
    slot = state.slots.get(ts.slot or "")
    if slot is not None and slot.task == tid:
        path = Path(slot.path)
        ref = worktrees.salvage_and_clear(repo, path, plan=plan.name, task=tid)
        if ref:
            notes.append(f"{tid} (no longer in the plan): its work is kept in {ref}")
        worktrees.detach(repo, path)
        clean = ref is not None or not worktrees.dirty_paths(path, repo)
        store.record(state, ev.SlotFreed(slot.name, clean), later=True)
    store.record(state, ev.TasksKept(tuple(t for t in state.tasks if t != tid)), later=True)
    return notes


def _recover_running(
    repo: Repository, store: StateStore, state: RunState, ts: TaskState
) -> list[str]:
    notes = []
    runner = ts.runner
    who = runner.describe() if runner else "an earlier run"
    last = ts.last
    if last is not None:
        stopped = stop_leftovers(store, state, ts, grace=repo.settings.grace)
        if stopped:
            notes.append(f"{ts.id}: stopped {stopped} leftover process(es)")
    store.record(state, ev.Interrupted(ts.id, f"the run was killed ({who} is gone)"), later=True)
    return notes
