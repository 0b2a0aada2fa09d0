"""SIGINT and SIGTERM as a stop request.

A long command (run, retry, verify) does not die on Ctrl-C: the signal sets an
event, the work stops its process groups (TERM, grace, KILL), state and the report
are written, and the command exits 130. A repeated signal while stopping only says
that forge is already stopping: giving up on the stop half way would leave exactly
the processes the stop exists to end.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopEvent(threading.Event):
    """A stop request, and which signal asked for it (None: set by code)."""

    def __init__(self) -> None:
        super().__init__()
        self.signum: int | None = None
        self.count = 0


class LinkedStop(threading.Event):
    """A stop of its own for one piece of work (a speculation thrown away, a losing
    candidate): set to stop it alone, and set whenever its parent is (the run's
    stop, Ctrl-C). Either way its process groups get TERM, grace, KILL."""

    def __init__(self, parent: threading.Event) -> None:
        super().__init__()
        self.parent = parent

    def is_set(self) -> bool:
        return super().is_set() or self.parent.is_set()


@contextlib.contextmanager
def on_stop_signals() -> Iterator[StopEvent]:
    """Within the block, SIGINT/SIGTERM set the yielded event instead of killing
    forge. Outside the main thread no handler can be installed; the event then only
    stops what sets it explicitly."""
    event = StopEvent()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        event.count += 1
        if event.signum is None:
            event.signum = signum
        event.set()
        if event.count >= 2:
            sys.stderr.write("forge: already stopping; waiting for its processes to end\n")

    previous: dict[int, signal._HANDLER] = {}
    try:
        for sig in _SIGNALS:
            previous[sig] = signal.signal(sig, handler)
        yield event
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
