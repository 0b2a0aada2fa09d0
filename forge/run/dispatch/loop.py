"""The dispatch loop of a run: what starts when.

A task starts when its dependencies have merged, a slot is free, and no running
task overlaps its files: waves are a view, not a barrier. Among ready tasks the
longest critical path goes first, ties in plan order. The loop is the only thread
that decides; attempts run on worker threads and report back through a queue.
Infrastructure failures wait out a backoff and then pause the run; a hold stops
new starts while running tasks finish.

Each pass takes in what ended, takes up a newer plan, pauses for a hold or a spent
budget, marks what is blocked, starts what is ready, and lets the gate start; then
it waits for news (an attempt's end, a slot ready, the gate's or a candidate's).
Its parts, a concern each: what is ready (ready.py), which agent the next attempt
runs on (launch.py), starting an attempt in its place (starts.py), the worker
threads (workers.py), what an attempt's end makes of its task (outcomes.py), and
what the dispatch remembers of each task (book.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from forge.plan.registry import Recorded
from forge.run.attempt import messages
from forge.run.attempt.context import Remote
from forge.run.budget import Budget
from forge.run.candidates import Candidates, Told
from forge.run.capacity import Capacity
from forge.run.context import RunContext
from forge.run.dispatch.book import Book
from forge.run.dispatch.launch import Launcher
from forge.run.dispatch.outcomes import Outcomes
from forge.run.dispatch.ready import Readiness
from forge.run.dispatch.starts import Starts
from forge.run.dispatch.workers import Workers
from forge.run.state import events as ev
from forge.run.state import hold as holds

if TYPE_CHECKING:
    from forge.run.gate.landing import Gate
    from forge.run.options import RunOptions

INFRA_BACKOFF_CAP = 300.0


class Dispatcher:
    """Decides what starts when. Only the loop thread changes dispatch decisions."""

    def __init__(
        self,
        ctx: RunContext,
        recorded: Recorded,
        options: RunOptions,
        on_event: Callable[[str], None],
        gate: Gate | None = None,
        remote: Remote | None = None,
    ) -> None:
        self.ctx = ctx
        self.on_event = on_event
        self.gate = gate  # verifies QUEUED tasks and lands them (None: tasks merge)
        self.book = Book(forced=None if options.requeued else options.only)
        self.workers = Workers(ctx, options.max_parallel or ctx.plan.max_parallel, remote)
        ctx.slots.on_ready = self.workers.wake
        if gate is not None:
            gate.wake = self.workers.wake
        capacity = Capacity(
            ctx,
            retries=options.infra_retries,
            backoff=ctx.settings.infra_backoff,  # doubled each time
            cap=INFRA_BACKOFF_CAP,
            on_event=on_event,
        )
        self.budget = Budget.of(ctx, options.budget)
        from forge.run.state.replan import LivePlan

        self.live = LivePlan(ctx.repo, ctx.plan.name)  # `forge plan` while this runs
        self.cands = Candidates(  # best-of-N: candidates run as units of their own
            ctx,
            gate=gate,
            retries=self.book.retries,
            running=self.book.running,
            told=Told(on_event, on_settled=self.book.settled, wake=self.workers.wake),
        )
        self.readiness = Readiness(ctx, options, self.book, self.cands)
        self.readiness.adopt(ctx.plan, recorded.critical_path)
        book, cands, readiness, workers = self.book, self.cands, self.readiness, self.workers
        launcher = Launcher(ctx, options, book, cands, capacity)
        self.starts = Starts(
            ctx=ctx,
            options=options,
            on_event=on_event,
            book=book,
            cands=cands,
            capacity=capacity,
            readiness=readiness,
            launcher=launcher,
            workers=workers,
        )
        self.outcomes = Outcomes(
            ctx=ctx,
            on_event=on_event,
            book=book,
            cands=cands,
            capacity=capacity,
            budget=self.budget,
            launcher=launcher,
            workers=workers,
            gate=gate,
        )

    def loop(self) -> None:
        """Dispatch until nothing more can start and nothing runs (or a stop, a
        pause, an attempt that could not start: that one is raised)."""
        state, running, workers = self.ctx.state, self.book.running, self.workers
        with workers:
            while True:
                self._drain(block=False)
                self.cands.poll()
                if self.ctx.stop.is_set() or workers.fatal is not None:
                    break
                self.live.open()  # a `forge plan` checks against what this starts
                self._take_up()
                self._brake()
                if not state.paused:
                    self.readiness.mark_blocked()
                    self.starts.start_ready()
                idle = not running and (bool(state.paused) or not self.readiness.waiting())
                idle = idle and not self.cands.busy()  # (a best-of-N selection runs)
                if self.gate is not None:
                    # `end`: the gate starts once nothing else can start before it lands
                    # (what waits, waits for a dependency or an overlapping task to land).
                    self.gate.release(not running)
                    idle = idle and self.gate.idle()
                self.live.close(running, finished=idle)
                if idle:
                    break
                self._drain(block=True)
            while running:  # stopped: the attempts see the event and end
                self._drain(block=True)
        self.live.close(running, finished=True)
        self.cands.close()
        if not state.paused and not self.ctx.stop.is_set() and workers.fatal is None:
            self.ctx.record(ev.BlamesSettled(), later=True)  # the gate is done: blames hold
            self.readiness.mark_blocked()
        self.ctx.save()
        if workers.fatal is not None:
            raise workers.fatal

    def _drain(self, *, block: bool) -> None:
        for tid, outcome in self.workers.ended(block=block):
            self.outcomes.ended(tid, outcome)

    def _brake(self) -> None:
        """Pause for a hold or a spent budget, when it keeps something from starting."""
        state = self.ctx.state
        held = holds.active(self.ctx.repo.state, self.ctx.plan.name)
        if held is not None and self.readiness.ready():
            why = messages.held(held.describe(), held.resume)
            self.ctx.record(ev.Paused(why), later=True)
        if not state.paused and self.budget.spent_out() and self.readiness.ready():
            self.ctx.record(ev.Paused(self.budget.describe()), later=True)

    def _take_up(self) -> None:
        """A newer version of the plan, recorded by `forge plan` while this runs."""
        recorded = self.live.newer()
        old = self.readiness.plan
        if recorded is None or recorded.plan.to_dict() == old.to_dict():
            return
        from forge.run.state import replan

        plan = recorded.plan
        change = replan.diff(old, plan)
        notes = replan.take_up(
            self.ctx.repo, plan, self.ctx.state, self.ctx.store, running=self.book.running
        )
        self.ctx.plan = plan
        self.readiness.adopt(plan, recorded.critical_path)
        for tid in change.dropped:  # per-task bookkeeping of tasks that are gone
            self.book.forget(tid)
        self.on_event(f"plan '{plan.name}' recorded again; taking up: {change.describe()}")
        for note in notes:
            self.on_event(note)
