"""Best-of-N: which passed candidate becomes the task's.

`select = "first"`: the first to pass. `select = "best"`: once every candidate
has ended, the one forge/run/gate/selection.py chooses (verifying each, or asking
a judge), on a thread of its own so the dispatcher's loop goes on meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from forge.plan.candidates import Candidate
from forge.plan.model import Task
from forge.run.attempt import messages
from forge.run.context import RunContext
from forge.run.gate.selection import Selection
from forge.run.state import events as ev
from forge.run.state import records
from forge.run.state.run_state import Status, TaskState

if TYPE_CHECKING:
    from forge.plan.repo_config import VerifyConfig


class Choice:
    """The order candidates passed in (this run), and the `best` selections: those
    running, and their results until taken."""

    def __init__(
        self,
        ctx: RunContext,
        config: VerifyConfig | None,
        on_event: Callable[[str], None],
        wake: Callable[[], None],
    ) -> None:
        self.ctx, self.config = ctx, config  # config: the gate's, to verify each with
        self.on_event, self.wake = on_event, wake  # wake: the dispatcher looks again
        self.passed_at: dict[str, int] = {}  # unit -> order it passed in (this run)
        self.choosing: set[str] = set()  # `best` tasks whose selection runs
        self.selections: dict[str, Selection] = {}  # its result, set by its thread

    def passed(self, unit: str) -> None:
        self.passed_at[unit] = len(self.passed_at)

    def in_order(self, cands: tuple[Candidate, ...], recs: dict[str, TaskState]) -> list[Candidate]:
        """The candidates that passed and wait to land, the first to pass first."""
        passed = (c for c in cands if recs[c.unit].status == Status.QUEUED)
        return sorted(passed, key=lambda c: self.passed_at.get(c.unit, -1))

    def busy(self, tid: str | None = None) -> bool:
        """A selection still runs (of task `tid`, or of any)."""
        return tid in self.choosing if tid is not None else bool(self.choosing)

    def chosen(
        self, task: Task, passed: list[Candidate], recs: dict[str, TaskState]
    ) -> Selection | None:
        """`select = "best"`, every candidate ended: the selection made, the failures
        it found recorded on each one's record. None while it runs (started now if
        it was not), or when the run was stopped meanwhile (nothing is judged)."""
        done = self.selections.pop(task.id, None)
        if done is None:
            if task.id not in self.choosing:
                self.choosing.add(task.id)
                threading.Thread(
                    target=self._choose,
                    args=(task, list(passed), dict(recs)),
                    name=f"select-{task.id}",
                    daemon=True,
                ).start()
            return None
        self.choosing.discard(task.id)
        if self.ctx.stop.is_set():
            return None
        for unit, why in done.failed.items():
            cts = recs[unit]
            log = cts.last.log if cts.last is not None else None
            source = records.FeedbackSource.verify("selection")
            self.ctx.record(ev.Failed(unit, Status.FAILED, why, log, source))
        return done

    def _choose(self, task: Task, passed: list[Candidate], recs: dict[str, TaskState]) -> None:
        from forge.run.gate.selection import choose

        try:
            result = choose(
                self.ctx, task, passed, recs, config=self.config, on_event=self.on_event
            )
        except Exception as exc:  # noqa: BLE001 recorded as each one's failure, never lost
            result = Selection(failed={c.unit: messages.forge_error(exc) for c in passed})
        self.selections[task.id] = result
        self.wake()
