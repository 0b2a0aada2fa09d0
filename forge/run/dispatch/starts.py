"""Starting the ready tasks: each in its place. A ready task starts when fewer
than `max_parallel` run, no running (or QUEUED) task overlaps its files, its
agent can take it, and a slot is ready for it; the slots that were not are grown
for the tasks that wait (forge/run/state/slots.py). A best-of-N task starts as its
candidates, each a unit of its own (forge/run/candidates.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from forge.frozen import frozen
from forge.plan.model import Task
from forge.run.attempt.context import Asked
from forge.run.candidates import Candidates, is_unit
from forge.run.capacity import Capacity
from forge.run.context import RunContext
from forge.run.dispatch.book import Book
from forge.run.dispatch.launch import Launch, Launcher
from forge.run.dispatch.ready import Readiness
from forge.run.dispatch.workers import Workers
from forge.run.state.run_state import FAILURES

if TYPE_CHECKING:
    from forge.run.options import RunOptions


@frozen
class Starts:
    """Starts the ready tasks of one dispatch on its workers."""

    ctx: RunContext
    options: RunOptions
    on_event: Callable[[str], None]
    book: Book
    cands: Candidates
    capacity: Capacity
    readiness: Readiness
    launcher: Launcher
    workers: Workers

    def start_ready(self) -> None:
        slots = self.ctx.slots
        waiting = 0  # ready tasks that found no slot ready
        for task in self.cands.expand(self.readiness.ready()):
            if len(self.book.running) + waiting >= self.workers.max_parallel:
                break
            if self.readiness.overlaps_running(task.id):
                continue
            wanted = self.launcher.launch_for(task)
            if wanted is None:
                continue
            launch = self.launcher.now(task, wanted)
            if launch is None:  # its agents wait out a backoff, or are at their cap
                if self.launcher.pause_if_stuck(task, wanted.spec):
                    return
                continue
            if self.workers.remote is not None or slots.reserve(task.id) or slots.error is not None:
                # (with an error, the attempt makes its slot itself, or fails saying why)
                self._start(task, launch)
            else:
                waiting += 1
        if waiting:
            base = self.ctx.repo.ref_value(self.ctx.state.integration)
            if base:
                slots.grow(base, wanted=waiting)

    def _start(self, task: Task, launch: Launch) -> None:
        spec, why, book = launch.spec, launch.why, self.book
        ts = self.ctx.state.record(task.id)
        if ts.status in FAILURES:
            book.retried(task.id)
        book.settled(task.id)
        book.running.add(task.id)
        fresh = self.options.fresh and self.options.only == task.id
        person = self.options.only == task.id  # `forge retry TASK`
        note = book.notes.pop(task.id, None)
        if note:
            self.on_event(f"{task.id}: {note}")
        self.on_event(
            f"{task.id}: started"
            + (f" ({spec})" if spec is not None else "")
            + (f" [{why}]" if why else "")
        )
        book.started(task.id)
        if spec is not None:
            self.capacity.started(task.id, spec.name)
        ctx = self.cands.context(task.id)
        if is_unit(task.id):
            self.cands.started(task.id)
        self.workers.submit(ctx, task, spec, Asked(fresh=fresh, fallback=why, person=person))
