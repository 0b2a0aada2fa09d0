"""The phases of an attempt (setup, agent, check, merge, ...), with their times.

Data-driven: an attempt's record carries a list of `Phase` (name, start, end in
epoch seconds), in the order they ran, so a new step (a review, a queue) only
opens a phase of its own name and every view (the live view, `forge report`)
shows it. A phase's start is announced to the live view; it is written to disk
with the attempt's next save, not one write more per phase, except where a step
may take long enough for `forge status` to be asked about it (`save=True`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Protocol

from forge.run.state import events as ev
from forge.run.state.records import Phase
from forge.run.state.run_state import Attempt, RunState
from forge.run.state.store import StateStore


class _Run(Protocol):
    """What a phase needs of the run (the attempt's RunContext has it)."""

    store: StateStore
    state: RunState

    def on_change(self, task: str, /) -> None: ...


@contextlib.contextmanager
def phase(
    ctx: _Run, task: str, attempt: Attempt, name: str, *, save: bool = False
) -> Iterator[None]:
    started = ev.PhaseStarted(task, attempt.number, name, now())
    ctx.store.record(ctx.state, started, later=not save)
    ctx.on_change(task)
    try:
        yield
    finally:
        ctx.store.record(ctx.state, ev.PhaseEnded(task, attempt.number, now(), name), later=True)


def current(attempt: Attempt | None) -> Phase | None:
    """The phase running now, if any."""
    if attempt is None or not attempt.phases:
        return None
    last = attempt.phases[-1]
    return last if last.end is None else None


def begin(task: str, attempt: int | None, name: str) -> ev.PhaseStarted:
    """A phase that another thread ends (the gate's `queue`)."""
    return ev.PhaseStarted(task, attempt, name, now())


def now() -> float:
    """The time a phase starts or ends at, and a verdict that ends the open ones
    (`Merged`, `Failed`: the reducer ends them)."""
    return round(time.time(), 3)
