"""Best-of-N: the winner's way to the integration branch, and what the others get.

The chosen candidate's work becomes the task's last attempt (queued for the gate,
or merged at once without one); a winner the gate fails fails on its own record;
once the task lands, the candidates still running are stopped and each loser's
work, committed or not, is kept under a salvage ref (forge/run/candidates.py
says when).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from forge.git import worktrees
from forge.plan.candidates import LOST, NOT_CHOSEN, Candidate, task_of_unit
from forge.plan.model import Task
from forge.run.attempt import phases
from forge.run.attempt.merging import merge_and_record
from forge.run.context import RunContext
from forge.run.gate.selection import Selection
from forge.run.state import events as ev
from forge.run.state import records
from forge.run.state.run_state import FAILURES, Status, TaskState

if TYPE_CHECKING:
    from forge.run.gate.landing import Gate


class Landing:
    """Lands a task's winner and gives back its losers; owns who is being stopped
    because another landed (unit -> the winner's label)."""

    def __init__(
        self,
        ctx: RunContext,
        gate: Gate | None,
        on_event: Callable[[str], None],
        stop: Callable[[str], None],
    ) -> None:
        self.ctx, self.gate, self.on_event = ctx, gate, on_event
        self.stop = stop  # stops one running unit (forge/run/candidates.py's Rounds)
        self.lost: dict[str, str] = {}  # unit stopped because this candidate won

    def promote(
        self, task: Task, c: Candidate, cts: TaskState, chosen: Selection | None = None
    ) -> bool:
        """The candidate's work becomes the task's: queued for the gate, or merged at
        once without one (True: the task's verdict is in, settle it again)."""
        ts = self.ctx.state.tasks[task.id]
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
        self.ctx.record(queued, phases.begin(task.id, landing.number, "queue"))
        why = f" ({chosen.why})" if chosen and chosen.why else ""
        self.on_event(f"{task.id}: candidate {c.label} passed; queued{why}")
        if self.gate is not None:
            self.gate.submit(task.id)
            return False
        self._merge(task, ts)
        return True

    def _merge(self, task: Task, ts: TaskState) -> None:
        """Without a gate the chosen candidate merges at once, as a task would."""
        last = ts.last
        assert last is not None and last.commit is not None
        merge_and_record(self.ctx, task, last.commit, at=phases.now())
        from forge.run.records import history

        history.settle(self.ctx, [task.id])  # (the winner's own row: it shares its tag)

    def gate_failed(self, ts: TaskState) -> str | None:
        """The unit whose work the task's last attempt took to the gate, when the gate
        failed it and its own record does not say so yet."""
        last = ts.last
        if ts.status not in FAILURES or last is None or last.candidate is None:
            return None
        unit = next((u for u, r in ts.candidates.items() if r.candidate == last.candidate), None)
        if unit is None or ts.candidates[unit].status != Status.QUEUED:
            return None
        return unit

    def fail_winner(self, ts: TaskState, cts: TaskState) -> None:
        """The gate failed the queued candidate: a failure of its own, fed to its retry."""
        gate_attempt = ts.last
        assert gate_attempt is not None
        with self.ctx.store.lock:
            source = gate_attempt.feedback_source or records.FeedbackSource(records.Source.VERIFY)
            failed = ev.Failed(
                cts.id,
                ts.status,
                ts.reason,
                gate_attempt.log,
                source,
                verified_by=ts.verified_by,
                at=phases.now(),
            )
            self.ctx.record(failed)
        self.on_event(f"{ts.id}: candidate {cts.candidate} {ts.status} ({ts.reason})")

    def landed(
        self, task: Task, cands: tuple[Candidate, ...], recs: dict[str, TaskState], live: list[str]
    ) -> None:
        """The task landed: its winner won, the others (`live`: the units running)
        are stopped, and those that passed end not chosen; each loser's work is kept."""
        last = self.ctx.state.tasks[task.id].last
        label = last.candidate if last is not None else None
        for c in cands:
            cts = recs[c.unit]
            if c.label == label:
                if cts.status != Status.MERGED:
                    merged = ev.Merged(
                        c.unit, cts.merged_commit, cts.merged_definition, at=phases.now()
                    )
                    self.ctx.record(merged)
            elif c.unit in live:
                if c.unit not in self.lost:
                    self.lost[c.unit] = label or "another candidate"
                    self.on_event(f"{task.id}: stopping candidate {c.label} (lost to {label})")
                    self.stop(c.unit)
            elif cts.status == Status.QUEUED:
                self._not_chosen(cts)

    def _not_chosen(self, cts: TaskState) -> None:
        """It passed and another landed: it ends here (never QUEUED for good), its
        attempt spent and not landed."""
        log = cts.last.log if cts.last is not None else None
        selected = records.FeedbackSource(records.Source.SELECTION)
        failed = ev.Failed(cts.id, Status.FAILED, NOT_CHOSEN, log, selected, at=phases.now())
        self.ctx.record(failed)
        if cts.last is not None:
            from forge.run.records import history

            history.restate(self.ctx, cts.last)
        salvage(self.ctx, cts, uncommitted=False)

    def ended(self, unit: str, status: Status) -> bool:
        """A unit ended: True when it was one stopped because another landed (its
        reason says which, its work is kept)."""
        winner = self.lost.pop(unit, None)
        if winner is None or status != Status.INTERRUPTED:
            return False
        cts = self.ctx.state.record(unit)
        self.ctx.record(ev.Outrun(unit, f"{LOST}{winner}"), later=True)
        if cts.last is not None:  # (its row said "stopped by the user")
            from forge.run.records import history

            history.restate(self.ctx, cts.last)
        salvage(self.ctx, cts, uncommitted=True)
        kept = f"; its work is kept in {cts.salvage[-1]}" if cts.salvage else ""
        self.on_event(f"{task_of_unit(unit)}: candidate {cts.candidate} lost to {winner}{kept}")
        return True


def salvage(ctx: RunContext, cts: TaskState, *, uncommitted: bool) -> None:
    """Keep a losing candidate's work, committed or not, under a salvage ref, and
    give its slot back clean."""
    repo, plan = ctx.repo, ctx.plan.name
    kept: list[str] = []
    slot = ctx.state.slots.get(cts.slot or "")
    if uncommitted and slot is not None and slot.task == cts.id:
        path = Path(slot.path)
        ref = worktrees.salvage_and_clear(repo, path, plan=plan, task=cts.id)
        if ref is not None:
            kept.append(ref)
        ctx.slots.release(cts.id)
    head = repo.ref_value(cts.branch) if cts.branch else None
    if not kept and head is not None and head != cts.base:
        kept.append(worktrees.keep(repo, head, plan=plan, task=cts.id))
    if kept:
        ctx.record(ev.Salvaged(cts.id, tuple(kept)))
