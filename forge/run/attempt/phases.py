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
from collections.abc import Iterator
from typing import Protocol

from forge.run.state.records import Phase
from forge.run.state.run_state import Attempt, RunState, StateStore


class _Run(Protocol):
    """What a phase needs of the run (the attempt's RunContext has it)."""

    store: StateStore
    state: RunState

    def on_change(self, task: str, /) -> None: ...


@contextlib.contextmanager
def phase(
    ctx: _Run, task: str, attempt: Attempt, name: str, *, save: bool = False
) -> Iterator[Phase]:
    entry = Phase.begin(name)
    with ctx.store.lock:
        attempt.phases.append(entry)
        if save:
            ctx.store.save(ctx.state, task=task)
    ctx.on_change(task)
    try:
        yield entry
    finally:
        with ctx.store.lock:
            entry.close()


def current(attempt: Attempt | None) -> Phase | None:
    """The phase running now, if any."""
    if attempt is None or not attempt.phases:
        return None
    last = attempt.phases[-1]
    return last if last.end is None else None


def begin(attempt: Attempt, name: str) -> None:
    """Open a phase that another thread ends (the gate's `queue`): saved with the
    attempt's next save."""
    attempt.phases.append(Phase.begin(name))


def end(attempt: Attempt | None) -> None:
    """End the attempt's open phase, if any (the caller holds the store's lock)."""
    now = current(attempt)
    if now is not None:
        now.close()
