"""What the gate runs now, for `forge status` and the live view: one line in the run
state's gate record (`doing`) and when that began (`since`).

The line says what the gate runs (the whole suite on a candidate, some failing
tests again on a tree), where a bisection is (`bisection step 2 of at most 3`), and
what the verification's lanes started last (`setup of lane unit`, `lane unit run 2
of at most 3`, from forge/verify/engine.py's `on_stage`); `since` is when that last
part began, so the time shown is the time of what runs now.

Each line is recorded and journaled at once, not left for the next write as a
phase's start is: it comes before a verification that may run for minutes, with
nothing else written meanwhile, and `forge status` reads the state on disk.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from forge.run.context import RunContext
from forge.run.state import events as ev


class Doing:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._what = ""
        self._step = 0  # bisection steps begun in this batch
        self._most: int | None = None  # at most this many, while bisecting
        self._lock = threading.Lock()

    def batch(self) -> None:
        """A new batch: no bisection step yet."""
        with self._lock:
            self._step, self._most = 0, None

    def bisecting(self, left: int) -> None:
        """A bisection step is about to run (`left`: at most this many steps to go,
        counting it), or the bisection is over (0)."""
        with self._lock:
            if left:
                self._step += 1
                self._most = self._step + left - 1
            else:
                self._most = None

    def now(self, what: str) -> None:
        """The gate starts `what` (`running the whole suite on 1a2b3c4d5e6f`)."""
        with self._lock:
            self._what = what
        self._write("")

    def stage(self, what: str) -> None:
        """A lane of the verification under way starts `what`."""
        self._write(what)

    def _write(self, stage: str) -> None:
        with self._lock:
            step = f"bisection step {self._step} of at most {self._most}: " if self._most else ""
            text = step + self._what + (f" ({stage})" if stage else "")
        with self.ctx.store.lock:
            gate = self.ctx.state.gate
            if gate is not None:
                self.ctx.record(ev.GateRecorded(replace(gate, doing=text, since=time.time())))
