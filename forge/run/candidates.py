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
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base.interrupt import LinkedStop
from forge.git import worktrees
from forge.git.trailers import merge_message
from forge.plan.candidates import (
    LOST,
    Candidate,
    candidates_of,
    is_unit,
    select_of,
    task_of_unit,
)
from forge.plan.model import Task
from forge.plan.specs import DEFAULT_AGENT
from forge.run.attempt import messages, phases
from forge.run.attempt.context import Outcome
from forge.run.context import RunContext
from forge.run.gate.selection import Selection
from forge.run.state import events as ev
from forge.run.state import records, reducer
from forge.run.state.run_state import FAILURES, Status, TaskState

if TYPE_CHECKING:
    from forge.plan.repo_config import VerifyConfig
    from forge.run.gate.landing import Gate

__all__ = ["Candidates", "is_unit", "task_of_unit"]

NOT_CHOSEN = "passed, not chosen"


@dataclasses.dataclass(frozen=True)
class Told:
    """Whom the candidates tell: the run's events, the dispatcher (a task's round ended)."""

    on_event: Callable[[str], None]
    on_settled: Callable[[str], None]
    wake: Callable[[], None] = lambda: None


class Candidates:
    """The best-of-N tasks of one run. Called from the dispatcher's loop thread only."""

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
        self.gate = gate
        self.retries = retries  # the dispatcher's: a round of a failed task is a retry
        self.running = running  # the dispatcher's: the tasks and units running now
        self.on_event, self.wake = told.on_event, told.wake  # wake: the dispatcher looks again
        self.on_settled = told.on_settled  # a round ended: the task is no longer forced
        self.rounds: dict[str, set[str]] = {}  # task -> units started (or passed) this round
        self.stops: dict[str, LinkedStop] = {}  # running unit -> its stop
        self.lost: dict[str, str] = {}  # unit stopped because this candidate won
        self.passed_at: dict[str, int] = {}  # unit -> order it passed in (this run)
        self.choosing: set[str] = set()  # `best` tasks whose selection runs
        self.selections: dict[str, Selection] = {}  # its result, set by its thread

    # -- what the dispatcher asks ----------------------------------------------

    def of(self, task: Task) -> tuple[Candidate, ...]:
        return candidates_of(self.ctx.plan, task, DEFAULT_AGENT)

    def records(self, task: Task) -> dict[str, TaskState]:
        """Each candidate's record (made on first use), by unit."""
        ts = self.ctx.state.tasks[task.id]
        missing = [c for c in self.of(task) if c.unit not in ts.candidates]
        if missing:
            self.ctx.apply(*(ev.CandidateAdded(task.id, c.unit, c.label) for c in missing))
        return ts.candidates

    def eligible(self, task: Task) -> bool | None:
        """During a round: whether a candidate is still to start (None: no round)."""
        started = self.rounds.get(task.id)
        if started is None:
            return None
        return bool(self._to_start(task, started))

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
            for unit in self._to_start(task, started):
                c = by_unit[unit]
                out.append(
                    dataclasses.replace(
                        task, id=unit, agent=c.spec, candidates=None, best_of=1, select=None
                    )
                )
        return out

    def context(self, unit: str) -> RunContext:
        """The context a unit runs in: a stop of its own, and finished work QUEUED
        (whether it lands is this module's decision, gate or not)."""
        if not is_unit(unit):
            return self.ctx
        stop = self.stops[unit] = LinkedStop(self.ctx.stop)
        return dataclasses.replace(self.ctx, stop=stop, gated=True)

    def started(self, unit: str) -> None:
        tid = task_of_unit(unit)
        self.rounds.setdefault(tid, set()).add(unit)
        ts = self.ctx.state.tasks[tid]
        if ts.status != Status.RUNNING and ts.status != Status.QUEUED:
            self.ctx.emit(ev.CandidatesRunning(tid, self.ctx.owner))

    def skipped(self, unit: str) -> None:
        """A candidate the escalation policy will not run: it counts as ended."""
        self.rounds.setdefault(task_of_unit(unit), set()).add(unit)

    def finished(self, unit: str, outcome: Outcome) -> None:
        self.stops.pop(unit, None)
        cts = self.ctx.state.record(unit)
        winner = self.lost.pop(unit, None)
        if winner is not None and outcome.status == Status.INTERRUPTED:
            self.ctx.apply(ev.Outrun(unit, f"{LOST}{winner}"))
            if cts.last is not None:  # (its row said "stopped by the user")
                from forge.run.records import history

                history.restate(self.ctx, cts.last)
            self._salvage(cts, uncommitted=True)
            kept = f"; its work is kept in {cts.salvage[-1]}" if cts.salvage else ""
            self.on_event(f"{task_of_unit(unit)}: candidate {cts.candidate} lost to {winner}{kept}")
        elif outcome.status != Status.QUEUED:  # (a pass is told when it is queued or chosen)
            why = f" ({outcome.reason})" if outcome.reason else ""
            self.on_event(f"{task_of_unit(unit)}: candidate {cts.candidate} {outcome.status}{why}")
        task = self.ctx.plan.find_task(task_of_unit(unit))
        if outcome.status == Status.INFRA:
            # It spent no attempt: it runs again in this round when its agent is back
            # (or on a fallback agent), as a task would.
            self.rounds.get(task_of_unit(unit), set()).discard(unit)
        if outcome.status == Status.QUEUED:
            self.passed_at[unit] = len(self.passed_at)
            if task is not None and select_of(self.ctx.plan, task) == "best":
                self.on_event(
                    f"{task.id}: candidate {cts.candidate} passed; waiting for the others"
                )
        if task is not None:
            self.settle(task)

    def poll(self) -> None:
        """What the gate did meanwhile: a landing stops the others, a failed winner
        makes way for the next candidate."""
        for task in self.ctx.plan.tasks:
            ts = self.ctx.state.tasks.get(task.id)
            if ts is None or not ts.candidates:
                continue
            open_ = task.id in self.rounds or ts.status in (Status.QUEUED, Status.MERGED)
            if open_ or self._gate_failed(ts) is not None:
                self.settle(task)

    def close(self) -> None:
        """The dispatch ended: a round that could not start every candidate (a pause,
        a stop) leaves its task to the next run."""
        for tid in list(self.rounds):
            task = self.ctx.plan.find_task(tid)
            if task is None:
                continue
            self.settle(task)
            ts = self.ctx.state.tasks[tid]
            if tid in self.rounds and ts.status == Status.RUNNING:
                stopped = self.ctx.stop.is_set()
                status = Status.INTERRUPTED if stopped else Status.PENDING
                self.ctx.emit(ev.Concluded(tid, status, messages.NOT_EVERY_CANDIDATE))

    # -- the task's status from its candidates' ---------------------------------

    def settle(self, task: Task) -> None:
        ts = self.ctx.state.tasks[task.id]
        recs = self.records(task)
        cands = self.of(task)
        live = [c for c in cands if c.unit in self.running]
        if ts.status == Status.MERGED:
            self._landed(task, ts, recs, live)
            return
        if ts.status == Status.QUEUED:
            return  # its winner is in the gate
        failed = self._gate_failed(ts)
        if failed is not None:
            self._fail_winner(ts, recs[failed])
        passed = sorted(
            (c for c in cands if recs[c.unit].status == Status.QUEUED),
            key=lambda c: self.passed_at.get(c.unit, -1),
        )
        started = self.rounds.get(task.id)
        pending = self._to_start(task, started) if started is not None else []
        if passed and select_of(self.ctx.plan, task) == "first":
            self._promote(task, ts, passed[0], recs[passed[0].unit])
            return
        if live or pending:
            if live and ts.status != Status.RUNNING:  # (else: when one starts)
                self.ctx.emit(ev.CandidatesRunning(task.id, self.ctx.owner))
            return
        if (passed or task.id in self.choosing) and self._best(task, ts, passed, recs):
            return
        if started is not None or failed is not None:
            self._conclude(task, ts, cands, recs)

    def busy(self) -> bool:
        """A selection still runs: the dispatch is not over."""
        return bool(self.choosing)

    def _best(
        self, task: Task, ts: TaskState, passed: list[Candidate], recs: dict[str, TaskState]
    ) -> bool:
        """`select = "best"`, every candidate ended: choose on a thread, then queue the
        chosen one. False when none may land."""
        done = self.selections.pop(task.id, None)
        if done is None:
            if task.id not in self.choosing:
                self.choosing.add(task.id)
                config = self.gate.config if self.gate is not None else None
                threading.Thread(
                    target=self._choose,
                    args=(task, list(passed), dict(recs), config),
                    name=f"select-{task.id}",
                    daemon=True,
                ).start()
            return True
        self.choosing.discard(task.id)
        if self.ctx.stop.is_set():
            return True  # stopped while verifying: nothing is judged (close() says so)
        for unit, why in done.failed.items():
            cts = recs[unit]
            log = cts.last.log if cts.last is not None else None
            self.ctx.emit(
                ev.Failed(unit, Status.FAILED, why, log, records.FeedbackSource.verify("selection"))
            )
        if done.chosen is None:
            return False
        self._promote(task, ts, done.chosen, recs[done.chosen.unit], done)
        return True

    def _choose(
        self,
        task: Task,
        passed: list[Candidate],
        recs: dict[str, TaskState],
        config: VerifyConfig | None,
    ) -> None:
        from forge.run.gate.selection import choose

        try:
            result = choose(self.ctx, task, passed, recs, config=config, on_event=self.on_event)
        except Exception as exc:  # noqa: BLE001 recorded as each one's failure, never lost
            result = Selection(failed={c.unit: messages.forge_error(exc) for c in passed})
        self.selections[task.id] = result
        self.wake()

    def _to_start(self, task: Task, started: set[str]) -> list[str]:
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

    def _gate_failed(self, ts: TaskState) -> str | None:
        """The unit whose work the task's last attempt took to the gate, when the gate
        failed it and its own record does not say so yet."""
        last = ts.last
        if ts.status not in FAILURES or last is None or last.candidate is None:
            return None
        unit = next((u for u, r in ts.candidates.items() if r.candidate == last.candidate), None)
        if unit is None or ts.candidates[unit].status != Status.QUEUED:
            return None
        return unit

    def _fail_winner(self, ts: TaskState, cts: TaskState) -> None:
        """The gate failed the queued candidate: a failure of its own, fed to its retry."""
        gate_attempt, own = ts.last, cts.last
        assert gate_attempt is not None
        with self.ctx.store.lock:
            source = gate_attempt.feedback_source or records.FeedbackSource(records.Source.VERIFY)
            failed = ev.Failed(
                cts.id, ts.status, ts.reason, gate_attempt.log, source, verified_by=ts.verified_by
            )
            self.ctx.emit(failed, *phases.end(cts.id, own))
        self.on_event(f"{ts.id}: candidate {cts.candidate} {ts.status} ({ts.reason})")

    def _promote(
        self,
        task: Task,
        ts: TaskState,
        c: Candidate,
        cts: TaskState,
        chosen: Selection | None = None,
    ) -> None:
        """The candidate's work becomes the task's: queued for the gate (or merged)."""
        own = cts.last
        assert own is not None and own.commit is not None
        landing = dataclasses.replace(
            own,
            number=len(ts.attempts) + 1,
            candidate=c.label,
            # the candidate's cost is on its own record; a judge's is the task's
            cost_usd=chosen.cost_usd if chosen else None,
            input_tokens=chosen.input_tokens if chosen else None,
            output_tokens=chosen.output_tokens if chosen else None,
            phases=[],
            review=None,
        )
        queued = ev.Queued(task.id, landing, cts.base, cts.branch)
        self.ctx.emit(queued, phases.begin(task.id, landing.number, "queue"))
        why = f" ({chosen.why})" if chosen and chosen.why else ""
        self.on_event(f"{task.id}: candidate {c.label} passed; queued{why}")
        if self.gate is not None:
            self.gate.submit(task.id)
        else:
            self._merge(task, ts)
            self.settle(task)

    def _merge(self, task: Task, ts: TaskState) -> None:
        """Without a gate the chosen candidate merges at once, as a task would."""
        from forge.git.merge import merge_task

        last = ts.last
        assert last is not None and last.commit is not None
        with self.ctx.merge_lock:
            res = merge_task(
                self.ctx.repo,
                ref=self.ctx.state.integration,
                task_commit=last.commit,
                message=merge_message(self.ctx.plan.name, task.id, last.number, task.title),
            )
            if res.merged:
                verdict: ev.Event = ev.Merged(task.id, res.commit, task.definition())
            else:
                verdict = reducer.conflicted(task.id, res.conflicts, log=last.log)
            self.ctx.emit(*phases.end(task.id, last), verdict)
        from forge.run.records import history

        history.settle(self.ctx, [task.id])  # (the winner's own row: it shares its tag)

    def _landed(
        self, task: Task, ts: TaskState, recs: dict[str, TaskState], live: list[Candidate]
    ) -> None:
        """The task landed: its winner won, the others are stopped and salvaged."""
        last = ts.last
        label = last.candidate if last is not None else None
        for c in self.of(task):
            cts = recs[c.unit]
            if c.label == label:
                if cts.status != Status.MERGED:
                    merged = ev.Merged(c.unit, cts.merged_commit, cts.merged_definition)
                    self.ctx.emit(merged, *phases.end(c.unit, cts.last))
            elif c in live:
                if c.unit not in self.lost:
                    self.lost[c.unit] = label or "another candidate"
                    self.on_event(f"{task.id}: stopping candidate {c.label} (lost to {label})")
                    stop = self.stops.get(c.unit)
                    if stop is not None:
                        stop.set()
            elif cts.status == Status.QUEUED:
                # It passed and another landed: it ends here (never QUEUED for good),
                # its attempt spent and not landed.
                log = cts.last.log if cts.last is not None else None
                selected = records.FeedbackSource(records.Source.SELECTION)
                failed = ev.Failed(c.unit, Status.FAILED, NOT_CHOSEN, log, selected)
                self.ctx.emit(failed, *phases.end(c.unit, cts.last))
                if cts.last is not None:
                    from forge.run.records import history

                    history.restate(self.ctx, cts.last)
                self._salvage(cts, uncommitted=False)
        if not live and self.rounds.pop(task.id, None) is not None:
            self.on_settled(task.id)

    def _conclude(
        self, task: Task, _ts: TaskState, cands: tuple[Candidate, ...], recs: dict[str, TaskState]
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
            self.ctx.emit(verdict)
        self.rounds.pop(task.id, None)
        self.on_settled(task.id)

    def _salvage(self, cts: TaskState, *, uncommitted: bool) -> None:
        """Keep a losing candidate's work, committed or not, under a salvage ref, and
        give its slot back clean."""
        repo, plan = self.ctx.repo, self.ctx.plan.name
        kept: list[str] = []
        slot = self.ctx.state.slots.get(cts.slot or "")
        if uncommitted and slot is not None and slot.task == cts.id:
            path = Path(slot.path)
            ref = worktrees.salvage_and_clear(repo, path, plan=plan, task=cts.id)
            if ref is not None:
                kept.append(ref)
            self.ctx.slots.release(cts.id)
        head = repo.ref_value(cts.branch) if cts.branch else None
        if not kept and head is not None and head != cts.base:
            kept.append(worktrees.keep(repo, head, plan=plan, task=cts.id))
        if kept:
            self.ctx.emit(ev.Salvaged(cts.id, tuple(kept)))
