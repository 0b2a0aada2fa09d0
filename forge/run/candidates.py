"""Best-of-N during a run: a task's candidates, each an attempt of its own, and what
their outcomes make of the task.

A candidate runs as a unit `<task>+<n>` (forge/plan/candidates.py) with a record of
its own inside its task's (`TaskState.candidates`), its own branch, slot, process
group, log, cost, check, scope check and review; the dispatcher starts units as it
starts tasks, so each counts toward `max_parallel` and its agent's cap. The task's
status follows from its candidates':

- a round starts when the task is dispatched: every candidate not yet passed
  starts (a retry runs each one again with its own last failure);
- the task is RUNNING while a candidate runs; a candidate that passes its check,
  scope and review is QUEUED on its own record, and (`select = "first"`) the
  first of them is the task's: its work becomes the task's last attempt, which the
  gate verifies and lands as any task's (`select = "best"`: once every candidate
  has ended, forge/run/gate/selection.py chooses);
- when the task lands, the candidates still running are stopped (TERM, grace,
  KILL) and every loser's work is kept under a salvage ref;
- a winner the gate fails (a culprit, a conflict) fails on its own record and
  the next candidate that passed is queued instead, with no new attempt;
- when every candidate has failed, the task is FAILED naming each.

Each concern owns its state: Rounds (here) starts a round's candidates, each with
a stop of its own; Choice (forge/run/candidate_choice.py) says which passed one is
the task's; Landing (forge/run/candidate_landing.py) lands it and gives back the
others; Candidates, what each candidate's end makes of its task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from forge.base.interrupt import LinkedStop
from forge.frozen import frozen
from forge.plan.candidates import Candidate, candidates_of, is_unit, select_of, task_of_unit
from forge.plan.model import Task
from forge.plan.specs import DEFAULT_AGENT
from forge.run.attempt import messages
from forge.run.attempt.context import Outcome
from forge.run.candidate_choice import Choice
from forge.run.candidate_landing import Landing
from forge.run.context import RunContext
from forge.run.state import events as ev
from forge.run.state.run_state import FAILURES, Status, TaskState

if TYPE_CHECKING:
    from forge.run.gate.landing import Gate

__all__ = ["Candidates", "is_unit", "task_of_unit"]


@frozen
class Told:
    """Whom the candidates tell: the run's events, the dispatcher (a task's round ended)."""

    on_event: Callable[[str], None]
    on_settled: Callable[[str], None]
    wake: Callable[[], None] = lambda: None


class Rounds:
    """Starting a task's candidates: the round each task is in (the units started,
    or passed, in it) and each running unit's own stop."""

    def __init__(self, ctx: RunContext, retries: dict[str, int], running: set[str]) -> None:
        self.ctx = ctx
        self.retries = retries  # the dispatcher's: a round of a failed task is a retry
        self.running = running  # the dispatcher's: the tasks and units running now
        self.rounds: dict[str, set[str]] = {}  # task -> units started (or passed) this round
        self.stops: dict[str, LinkedStop] = {}  # running unit -> its stop

    def of(self, task: Task) -> tuple[Candidate, ...]:
        return candidates_of(self.ctx.plan, task, DEFAULT_AGENT)

    def records(self, task: Task) -> dict[str, TaskState]:
        """Each candidate's record (made on first use), by unit."""
        ts = self.ctx.state.tasks[task.id]
        missing = [c for c in self.of(task) if c.unit not in ts.candidates]
        if missing:
            self.ctx.record(
                *(ev.CandidateAdded(task.id, c.unit, c.label) for c in missing), later=True
            )
        return ts.candidates

    def eligible(self, task: Task) -> bool | None:
        """During a round: whether a candidate is still to start (None: no round)."""
        started = self.rounds.get(task.id)
        if started is None:
            return None
        return bool(self.to_start(task, started))

    def expand(self, ready: Iterable[Task]) -> list[Task]:
        """The ready tasks, a best-of-N task replaced by its candidates to start."""
        out: list[Task] = []
        for task in ready:
            cands = self.of(task)
            if not cands:
                out.append(task)
                continue
            started = self.rounds.get(task.id)
            if started is None:
                started = self._begin(task)
            by_unit = {c.unit: c for c in cands}
            for unit in self.to_start(task, started):
                c = by_unit[unit]
                out.append(
                    dataclasses.replace(
                        task, id=unit, agent=c.spec, candidates=None, best_of=1, select=None
                    )
                )
        return out

    def context(self, unit: str) -> RunContext:
        """The context a unit runs in: a stop of its own, and finished work QUEUED
        (whether it lands is the Candidates' decision, gate or not)."""
        if not is_unit(unit):
            return self.ctx
        stop = self.stops[unit] = LinkedStop(self.ctx.stop)
        return dataclasses.replace(self.ctx, stop=stop, gated=True)

    def started(self, unit: str) -> None:
        tid = task_of_unit(unit)
        self.rounds.setdefault(tid, set()).add(unit)
        ts = self.ctx.state.tasks[tid]
        if ts.status != Status.RUNNING and ts.status != Status.QUEUED:
            self.ctx.record(ev.CandidatesRunning(tid, self.ctx.owner))

    def skipped(self, unit: str) -> None:
        """A candidate the escalation policy will not run: it counts as ended."""
        self.rounds.setdefault(task_of_unit(unit), set()).add(unit)

    def ended(self, unit: str, status: Status) -> None:
        self.stops.pop(unit, None)
        if status == Status.INFRA:
            # It spent no attempt: it runs again in this round when its agent is back
            # (or on a fallback agent), as a task would.
            self.rounds.get(task_of_unit(unit), set()).discard(unit)

    def stop(self, unit: str) -> None:
        """Stop one running unit alone (another candidate landed)."""
        stop = self.stops.get(unit)
        if stop is not None:
            stop.set()

    def is_open(self, tid: str) -> bool:
        return tid in self.rounds

    def open_tasks(self) -> list[str]:
        return list(self.rounds)

    def end(self, tid: str) -> bool:
        """The task's round is over (False: it had none)."""
        return self.rounds.pop(tid, None) is not None

    def pending(self, task: Task) -> list[str] | None:
        """The units still to start in the task's round (None: no round)."""
        started = self.rounds.get(task.id)
        return None if started is None else self.to_start(task, started)

    def to_start(self, task: Task, started: set[str]) -> list[str]:
        if self.ctx.state.tasks[task.id].status in (Status.QUEUED, Status.MERGED):
            return []  # (a candidate in the gate: the others wait to see if it lands)
        recs = self.records(task)
        return [
            c.unit
            for c in self.of(task)
            if c.unit not in started
            and c.unit not in self.running
            and recs[c.unit].status not in (Status.MERGED, Status.QUEUED)
        ]

    def _begin(self, task: Task) -> set[str]:
        """A new round: every candidate that has not passed runs (again)."""
        ts = self.ctx.state.tasks[task.id]
        if ts.status in FAILURES:
            self.retries[task.id] = self.retries.get(task.id, 0) + 1
        recs = self.records(task)
        started = {u for u, r in recs.items() if r.status == Status.QUEUED}
        self.rounds[task.id] = started
        return started


class Candidates:
    """The best-of-N tasks of one run: what each candidate's end makes of its task.
    Called from the dispatcher's loop thread only."""

    def __init__(
        self,
        ctx: RunContext,
        *,
        gate: Gate | None,
        retries: dict[str, int],
        running: set[str],
        told: Told,
    ) -> None:
        self.ctx = ctx
        self.running = running  # the dispatcher's: the tasks and units running now
        self.on_event, self.on_settled = told.on_event, told.on_settled
        self.rounds = Rounds(ctx, retries, running)
        config = gate.config if gate is not None else None
        self.choice = Choice(ctx, config, told.on_event, told.wake)
        self.landing = Landing(ctx, gate, told.on_event, self.rounds.stop)

    # -- a round's starts (Rounds) -----------------------------------------------

    def eligible(self, task: Task) -> bool | None:
        return self.rounds.eligible(task)

    def expand(self, ready: Iterable[Task]) -> list[Task]:
        return self.rounds.expand(ready)

    def context(self, unit: str) -> RunContext:
        return self.rounds.context(unit)

    def started(self, unit: str) -> None:
        self.rounds.started(unit)

    def skipped(self, unit: str) -> None:
        self.rounds.skipped(unit)

    # -- what each end makes of its task ------------------------------------------

    def finished(self, unit: str, outcome: Outcome) -> None:
        self.rounds.ended(unit, outcome.status)
        cts = self.ctx.state.record(unit)
        tid = task_of_unit(unit)
        # (one stopped because another landed is told by the landing; a pass, when
        # it is queued or chosen)
        if not self.landing.ended(unit, outcome.status) and outcome.status != Status.QUEUED:
            why = f" ({outcome.reason})" if outcome.reason else ""
            self.on_event(f"{tid}: candidate {cts.candidate} {outcome.status}{why}")
        task = self.ctx.plan.find_task(tid)
        if outcome.status == Status.QUEUED:
            self.choice.passed(unit)
            if task is not None and select_of(self.ctx.plan, task) == "best":
                self.on_event(f"{tid}: candidate {cts.candidate} passed; waiting for the others")
        if task is not None:
            self.settle(task)

    def poll(self) -> None:
        """What the gate did meanwhile: a landing stops the others, a failed winner
        makes way for the next candidate."""
        for task in self.ctx.plan.tasks:
            ts = self.ctx.state.tasks.get(task.id)
            if ts is None or not ts.candidates:
                continue
            open_ = self.rounds.is_open(task.id) or ts.status in (Status.QUEUED, Status.MERGED)
            if open_ or self.landing.gate_failed(ts) is not None:
                self.settle(task)

    def close(self) -> None:
        """The dispatch ended: a round that could not start every candidate (a pause,
        a stop) leaves its task to the next run."""
        for tid in self.rounds.open_tasks():
            task = self.ctx.plan.find_task(tid)
            if task is None:
                continue
            self.settle(task)
            ts = self.ctx.state.tasks[tid]
            if self.rounds.is_open(tid) and ts.status == Status.RUNNING:
                stopped = self.ctx.stop.is_set()
                status = Status.INTERRUPTED if stopped else Status.PENDING
                self.ctx.record(ev.Concluded(tid, status, messages.NOT_EVERY_CANDIDATE))

    def busy(self) -> bool:
        """A selection still runs: the dispatch is not over."""
        return self.choice.busy()

    # -- the task's status from its candidates' ---------------------------------

    def settle(self, task: Task) -> None:
        ts = self.ctx.state.tasks[task.id]
        recs, cands = self.rounds.records(task), self.rounds.of(task)
        live = [c.unit for c in cands if c.unit in self.running]
        if ts.status == Status.MERGED:
            self.landing.landed(task, cands, recs, live)
            if not live and self.rounds.end(task.id):
                self.on_settled(task.id)
            return
        if ts.status == Status.QUEUED:
            return  # its winner is in the gate
        failed = self.landing.gate_failed(ts)
        if failed is not None:
            self.landing.fail_winner(ts, recs[failed])
        passed = self.choice.in_order(cands, recs)
        pending = self.rounds.pending(task)
        if passed and select_of(self.ctx.plan, task) == "first":
            self._promote(task, passed[0], recs)
            return
        if live or pending:
            if live and ts.status != Status.RUNNING:  # (else: when one starts)
                self.ctx.record(ev.CandidatesRunning(task.id, self.ctx.owner))
            return
        if (passed or self.choice.busy(task.id)) and self._best(task, passed, recs):
            return
        if pending is not None or failed is not None:
            self._conclude(task, cands, recs)

    def _promote(self, task: Task, c: Candidate, recs: dict[str, TaskState]) -> None:
        if self.landing.promote(task, c, recs[c.unit]):
            self.settle(task)  # (merged at once, without a gate)

    def _best(self, task: Task, passed: list[Candidate], recs: dict[str, TaskState]) -> bool:
        """`select = "best"`, every candidate ended: choose on a thread, then queue the
        chosen one. False when none may land."""
        done = self.choice.chosen(task, passed, recs)
        if done is None:
            return True  # (choosing; or stopped meanwhile: close() says so)
        if done.chosen is None:
            return False
        if self.landing.promote(task, done.chosen, recs[done.chosen.unit], done):
            self.settle(task)
        return True

    def _conclude(
        self, task: Task, cands: tuple[Candidate, ...], recs: dict[str, TaskState]
    ) -> None:
        """Every candidate ended and none is left to land: the task's own verdict."""
        ended = [recs[c.unit] for c in cands]
        with self.ctx.store.lock:
            if self.ctx.stop.is_set() and any(r.status == Status.INTERRUPTED for r in ended):
                verdict = ev.Concluded(task.id, Status.INTERRUPTED, messages.STOPPED)
            elif all(r.status == Status.INFRA for r in ended):
                verdict = ev.Concluded(task.id, Status.INFRA, ended[0].reason)
            else:
                verdict = ev.Concluded(
                    task.id,
                    Status.FAILED,
                    f"all {len(cands)} candidates failed: "
                    + "; ".join(
                        f"{c.label} {recs[c.unit].reason or recs[c.unit].status}" for c in cands
                    ),
                )
            self.ctx.record(verdict)
        self.rounds.end(task.id)
        self.on_settled(task.id)
