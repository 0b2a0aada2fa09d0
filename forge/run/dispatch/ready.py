"""What may start now, and what never will in this run.

A task may start when its dependencies have merged, it is not running, and the
run may start it again (a retry left, its backoff over, the escalation policy not
against it); among those the longest critical path goes first, ties in plan
order. A task whose dependency failed for good is BLOCKED (and unblocked when the
dependency merges after all). Whether a ready task starts at once is for the
starts (forge/run/dispatch/starts.py): a slot, its agents, no overlapping work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from forge.plan.model import Plan, Task
from forge.run.attempt import messages
from forge.run.candidates import Candidates, task_of_unit
from forge.run.context import RunContext
from forge.run.dispatch.book import Book
from forge.run.state import events as ev
from forge.run.state.run_state import FAILURES, REDISPATCH, Status

if TYPE_CHECKING:
    from forge.run.options import RunOptions


class Readiness:
    """The plan as the dispatch orders it, and which of its tasks may start."""

    def __init__(self, ctx: RunContext, options: RunOptions, book: Book, cands: Candidates) -> None:
        self.ctx = ctx
        self.options = options
        self.book = book
        self.cands = cands
        self.plan = ctx.plan
        self.order: dict[str, int] = {}
        self.cp: dict[str, float] = {}
        self.overlaps: Mapping[str, frozenset[str]] = {}

    def adopt(self, plan: Plan, critical_path: Mapping[str, float]) -> None:
        """Order the tasks of `plan` (the recorded critical path, else computed)."""
        from forge.plan import dag

        self.plan = plan
        self.order = {t.id: i for i, t in enumerate(plan.tasks)}
        self.cp = dict(critical_path) or dag.critical_path(plan)
        self.overlaps = dag.task_overlaps(plan)

    def ready(self) -> list[Task]:
        ready = [t for t in self.plan.tasks if self.eligible(t)]
        ready.sort(key=lambda t: (-self.cp.get(t.id, 1.0), self.order[t.id]))
        return ready

    def eligible(self, task: Task) -> bool:
        ts = self.ctx.state.tasks[task.id]
        book = self.book
        # A QUEUED task's work is done: it waits for the gate (a re-queued one too).
        if task.id in book.running or ts.status in (Status.MERGED, Status.QUEUED):
            return False
        if self.options.only and task.id != self.options.only:
            return False
        if not self._deps_merged(task):
            return False
        in_round = self.cands.eligible(task)
        if in_round is not None:  # a best-of-N task whose candidates are under way
            return in_round
        if task.id in book.no_auto:  # the policy said stop (split, or no progress)
            return False
        if ts.status == Status.INFRA:
            # With fallback agents it may start at once, elsewhere (capacity decides).
            return bool(self.plan.fallback) or not book.backed_off(task.id)
        if ts.status in REDISPATCH:
            return True
        if book.forced == task.id:
            return True
        return ts.status in FAILURES and book.retries.get(task.id, 0) < self.options.retry_failed

    def overlaps_running(self, tid: str) -> bool:
        # A QUEUED task's work is not on integration yet: a task overlapping it waits
        # for it to land, so that its base holds that work (else it would conflict).
        tasks = self.ctx.state.tasks
        running = {task_of_unit(t) for t in self.book.running}  # (a candidate: its task's files)
        return any(
            other in running or tasks[other].status == Status.QUEUED
            for other in self.overlaps.get(task_of_unit(tid), ())
        )

    def waiting(self) -> bool:
        """Is anything still to be started (now or after a backoff)?"""
        return any(self.eligible(t) for t in self.plan.tasks) or any(
            self.ctx.state.tasks[t].status == Status.INFRA and t not in self.book.running
            for t in self.book.not_before
        )

    def mark_blocked(self) -> None:
        state = self.ctx.state
        changed = False
        for task in self.plan.tasks:
            ts = state.tasks[task.id]
            if ts.status not in (Status.PENDING, Status.BLOCKED) or task.id in self.book.running:
                continue
            bad = [d for d in task.deps if state.tasks[d].status != Status.MERGED]
            blocked_by = [d for d in bad if self._finally_unmerged(d)]
            if blocked_by and ts.status != Status.BLOCKED:
                d = blocked_by[0]
                why = messages.dependency_not_merged(d, state.tasks[d].status)
                self.ctx.record(ev.Blocked(task.id, why), later=True)
                changed = True
            elif not bad and ts.status == Status.BLOCKED:
                self.ctx.record(ev.Unblocked(task.id), later=True)
                changed = True
        if changed:
            self.ctx.save()

    def _deps_merged(self, task: Task) -> bool:
        return all(self.ctx.state.tasks[d].status == Status.MERGED for d in task.deps)

    def _finally_unmerged(self, tid: str) -> bool:
        """Will `tid` stay unmerged for the rest of this run?"""
        ts = self.ctx.state.tasks[tid]
        if ts.status in (Status.MERGED, Status.QUEUED, Status.RUNNING) or tid in self.book.running:
            return False  # (a QUEUED task lands, or fails and says so: not final yet)
        if ts.doubted:
            return False  # blamed, waiting for evidence: it may yet land in this run
        if ts.status == Status.BLOCKED:
            return True
        task = self.plan.find_task(tid)
        if task is None:
            return True
        if ts.status in (Status.PENDING, Status.INTERRUPTED, Status.INFRA):
            # Pending work is not a failure: only a dependency that failed blocks.
            return any(self._finally_unmerged(d) for d in task.deps)
        return not self.eligible(task)
