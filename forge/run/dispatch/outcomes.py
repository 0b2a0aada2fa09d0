"""What the end of an attempt makes of its task, for the dispatch: its spend
counts toward the budget, its work goes to the gate, an infrastructure failure
backs its agent off (and pauses the run when the task has no agent left), an
attempt that ran says its providers work, and work that makes no progress is not
retried automatically. A candidate's end is its task's round's (candidates.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from forge.agents.names import AgentSpec
from forge.frozen import frozen
from forge.run.attempt.context import Outcome
from forge.run.budget import Budget
from forge.run.candidates import Candidates, is_unit
from forge.run.capacity import Capacity
from forge.run.context import RunContext
from forge.run.dispatch.book import Book
from forge.run.dispatch.launch import Launcher
from forge.run.dispatch.workers import Workers
from forge.run.state.records import ReviewVerdict
from forge.run.state.run_state import Stall, Status

if TYPE_CHECKING:
    from forge.run.gate.landing import Gate


@frozen
class Outcomes:
    """Books each ended attempt of one dispatch. Called from the loop thread only."""

    ctx: RunContext
    on_event: Callable[[str], None]
    book: Book
    cands: Candidates
    capacity: Capacity
    budget: Budget
    launcher: Launcher
    workers: Workers
    gate: Gate | None  # verifies QUEUED tasks and lands them (None: tasks merge)

    def ended(self, tid: str, outcome: Outcome) -> None:
        self.book.running.discard(tid)
        if self.workers.never_started(tid):
            self.capacity.finished(tid)  # it never ran: said once, by the run's end
            return
        self.budget.add(self.ctx.state.record(tid).last)
        if not is_unit(tid):  # (a candidate's end is told by forge/run/candidates.py)
            self.on_event(
                f"{tid}: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else "")
            )
        ran_on = self.capacity.finished(tid)
        since = self.book.since.pop(tid, 0.0)
        if is_unit(tid):
            self.cands.finished(tid, outcome)  # what it makes of its task
        elif outcome.status == Status.QUEUED and self.gate is not None:
            self.gate.submit(tid)
        if outcome.status == Status.INFRA:
            self._infra(tid, outcome, ran_on, since)
            return
        if ran_on is not None and outcome.status != Status.INTERRUPTED:
            self._worked(tid, ran_on)
        if outcome.stall == Stall.NO_PROGRESS or (
            outcome.stall == Stall.NO_CHANGES and len(self.ctx.state.record(tid).attempts) > 1
        ):
            # Work that makes no progress is not retried automatically (a retry that
            # changes nothing, or changes the same thing again).
            self.book.no_auto.add(tid)

    def _infra(self, tid: str, outcome: Outcome, ran_on: str | None, since: float) -> None:
        """The provider failed, not the task: its agent backs off, or is paused."""
        name = outcome.infra_agent or ran_on
        if name is None:
            return
        wait = self.capacity.failed(
            name,
            reason=outcome.reason,
            kind=outcome.infra_kind,
            retry_after=outcome.infra_retry_after,
            since=since,
        )
        if is_unit(tid):
            return
        if wait is not None:
            self.book.backoff(tid, wait)
        task = self.ctx.plan.task(tid)
        self.launcher.pause_if_stuck(task, self.launcher.primary(task))

    def _worked(self, tid: str, ran_on: str) -> None:
        """An attempt ran on `ran_on` (and its reviewer judged it): both providers work."""
        self.capacity.worked(ran_on)
        last = self.ctx.state.record(tid).last
        review = last.review if last is not None else None
        if review and review.verdict in (ReviewVerdict.APPROVE, ReviewVerdict.REJECT):
            self.capacity.worked(AgentSpec.of(review.agent).name)
