"""A plan recorded again while it runs.

`forge plan` does not take the run lock from the running `forge run`: under the
plan's record lock it checks the new version against what the run has started
(published in live.json) and merged (state.json), and writes plan.json only when
no running or merged task changes. The run, holding the same record lock while it
decides what to start, sees plan.json change at its next dispatch and takes the new
version up: new tasks join, tasks removed before they started are dropped. Both
sides hold the record lock only for moments, so neither waits on the other's work.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path

from forge.base.files import JsonObject, read_json_or, write_json
from forge.base.liveness import Owner
from forge.errors import ForgeError, StateError
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan import registry
from forge.plan.model import Plan
from forge.plan.registry import Recorded
from forge.run.state import events as ev
from forge.run.state.run_state import RunState, Status
from forge.run.state.store import StateStore

LIVE_FILE = "live.json"  # what the running forge run has started, and if it still starts
# Statuses of work that is under way: a change to such a task cannot be taken up.
UNDER_WAY = frozenset({Status.RUNNING, "QUEUED"})


@frozen
class Change:
    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [
            f"{what} {', '.join(ids)}"
            for what, ids in (
                ("added", self.added),
                ("dropped", self.dropped),
                ("changed", self.changed),
            )
            if ids
        ]
        return "; ".join(parts) or "no task changes"


def diff(old: Plan, new: Plan) -> Change:
    before = {t.id: t.to_dict() for t in old.tasks}
    after = {t.id: t.to_dict() for t in new.tasks}
    return Change(
        added=tuple(t for t in after if t not in before),
        dropped=tuple(t for t in before if t not in after),
        changed=tuple(t for t in after if t in before and after[t] != before[t]),
    )


def settings(plan: Plan) -> JsonObject:
    """What a running forge run has built on: everything but the tasks."""
    data = plan.to_dict()
    for key in ("tasks", "source"):
        data.pop(key, None)
    return data


# --- the `forge plan` side ------------------------------------------------------------


@frozen
class TakenUp:
    """What `forge plan` tells about a version recorded while the plan runs."""

    pid: int
    change: Change
    dispatching: bool  # False: the run has started its last task already

    def to_dict(self) -> JsonObject:
        return {
            "pid": self.pid,
            "takes_up": self.dispatching,
            "added": list(self.change.added),
            "dropped": list(self.change.dropped),
            "changed": list(self.change.changed),
        }

    def describe(self) -> str:
        if not self.dispatching:
            return (
                f"recorded; the running forge run (pid {self.pid}) starts nothing more, so "
                f"the next `forge run` takes up: {self.change.describe()}"
            )
        return (
            f"recorded; the running forge run (pid {self.pid}) takes up: {self.change.describe()}"
        )


def record(repo: Repository, plan_path: Path) -> tuple[Recorded, TakenUp | None]:
    """`forge plan`: record the plan; while it runs, only what the run can take up."""
    taken: list[TakenUp] = []

    def while_running(new: Recorded) -> Recorded | None:
        owner = _run_owner(repo, new.name)
        if owner is None:
            return None  # a `forge clean` or `forge verify` holds it: busy, as ever
        try:
            checked, change, dispatching = check_live(repo, new, owner)
        except FileNotFoundError:
            return None  # nothing recorded that a run could be running
        taken.append(TakenUp(owner.pid, change, dispatching))
        return checked

    recorded = registry.record(repo, plan_path, while_running=while_running)
    return recorded, (taken[0] if taken else None)


def _run_owner(repo: Repository, name: str) -> Owner | None:
    try:
        data = read_json_or(repo.state.plan_dir(name) / "owner.json", None, what="lock owner")
        owner = Owner.from_dict(data) if isinstance(data, dict) else None
    except (StateError, KeyError, TypeError, ValueError):
        return None
    if owner is None or owner.command != "forge run" or not owner.alive():
        return None
    return owner


def _live(repo: Repository, name: str, owner: Owner) -> tuple[set[str], bool]:
    """The tasks the run has started and whether it still starts any. A live.json of
    another process (an earlier run) says nothing: the run has not dispatched yet."""
    try:
        data = read_json_or(repo.state.plan_dir(name) / LIVE_FILE, None, what="live run file")
    except StateError:
        data = None
    if not isinstance(data, dict) or (data.get("pid"), data.get("start")) != (
        owner.pid,
        owner.start,
    ):
        return set(), True
    return set(data.get("running", [])), not data.get("closed", False)


def check_live(repo: Repository, new: Recorded, owner: Owner) -> tuple[Recorded, Change, bool]:
    """Refuse (ForgeError, nothing written) a version that changes what the running
    forge run has built on; otherwise the version to write, with the run's base."""
    name = new.name
    old = registry.load_recorded(repo, name)
    who = f"the running forge run (pid {owner.pid})"
    was, now = settings(old.plan), settings(new.plan)
    keys = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
    if keys:
        raise ForgeError(
            f"plan '{name}' is running ({who}): only its tasks can change while it runs, "
            f"and {', '.join(f'`{k}`' for k in keys)} changed; record it once the run ends"
        )
    running, dispatching = _live(repo, name, owner)
    state = StateStore(repo.state, name).load_existing()
    statuses = {tid: ts.status for tid, ts in (state.tasks.items() if state else ())}
    change = diff(old.plan, new.plan)
    problems = []
    for tid in change.changed + change.dropped:
        status = statuses.get(tid, Status.PENDING)
        under_way = tid in running or status in UNDER_WAY
        if not (under_way or status == Status.MERGED):
            continue
        what = "changed" if tid in change.changed else "removed"
        if status == Status.MERGED:
            problems.append(
                f"task '{tid}' has merged, so it cannot be {what} while {who} runs the plan: "
                f"keep it as it is; put further work in a new task"
            )
        else:
            problems.append(
                f"task '{tid}' is running, so it cannot be {what} while {who} runs the plan: "
                f"keep it as it is, and once the run ends record the change and run "
                f"`forge retry {tid} --plan {name} --fresh`"
            )
    if problems:
        raise ForgeError("\n".join([*problems, f"nothing recorded; plan '{name}' is as it was"]))
    # The run's integration branch grew from the base it pinned: keep it.
    return replace(new, base_ref=old.base_ref, base_commit=old.base_commit), change, dispatching


# --- the `forge run` side -------------------------------------------------------------


class LivePlan:
    """The running forge run's end: notices a new plan.json and says what it has
    started, both under the record lock."""

    def __init__(self, repo: Repository, name: str) -> None:
        self.repo = repo
        self.name = name
        self.file = repo.state.plan_file(name)
        self.live_file = repo.state.plan_dir(name) / LIVE_FILE
        self.lock = registry.record_lock(repo, name)
        self.me = Owner.me()
        self.seen: tuple[int, int, int] | None = None  # None: compare the first time
        self.published: tuple[tuple[str, ...], bool] | None = None

    def open(self) -> None:
        """Hold the record lock while deciding what starts. A `forge plan` holds it for
        moments only; one that does not let go (stopped, say) must not stop the run."""
        from filelock import Timeout

        if self.lock.is_locked:
            return
        with contextlib.suppress(Timeout):
            self.lock.acquire(timeout=5)

    def close(self, running: set[str], *, finished: bool) -> None:
        """Say what has started (and whether anything more will), then let go."""
        try:
            self.publish(running, closed=finished)
        finally:
            if self.lock.is_locked:
                self.lock.release()

    def newer(self) -> Recorded | None:
        """The recorded plan if plan.json changed since last looked at (an atomic
        replace gives it a new inode), else None."""
        try:
            st = os.stat(self.file)
        except FileNotFoundError:
            return None
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        if seen == self.seen:
            return None
        self.seen = seen
        try:
            return registry.load_recorded(self.repo, self.name)
        except (FileNotFoundError, ForgeError):
            return None  # unreadable: keep running the version in hand

    def publish(self, running: set[str], *, closed: bool = False) -> None:
        now = (tuple(sorted(running)), closed)
        if now == self.published:
            return
        write_json(
            self.live_file,
            {"pid": self.me.pid, "start": self.me.start, "running": list(now[0]), "closed": closed},
            compact=True,
        )
        self.published = now


def take_up(
    repo: Repository, plan: Plan, state: RunState, store: StateStore, *, running: set[str]
) -> list[str]:
    """Make the run state fit the new version `plan`: its new tasks PENDING, tasks no
    longer in it dropped (their leftovers salvaged). A task that is running stays, even
    if it left the plan (a `forge plan` never lets that happen; a run must not lose it)."""
    from forge.run.state import recovery

    notes: list[str] = []
    ids = plan.task_ids
    with store.lock:
        # Built aside and swapped in whole: other threads read state.tasks meanwhile.
        scratch = replace(state, tasks=dict(state.tasks))
        dropped = [
            tid
            for tid, ts in scratch.tasks.items()
            if tid not in ids
            and tid not in running
            and ts.status != Status.MERGED
            and ts.status not in UNDER_WAY
        ]
        for tid in dropped:
            notes += recovery.drop_task(repo, plan, store, scratch, tid)
        added = [tid for tid in ids if tid not in scratch.tasks]
        order = {tid: i for i, tid in enumerate(ids)}
        kept = sorted([*scratch.tasks, *added], key=lambda tid: order.get(tid, len(order)))
        store.record(state, ev.TasksKept(tuple(kept)), later=True)  # (swapped in whole)
        store.save(state)
    return notes
