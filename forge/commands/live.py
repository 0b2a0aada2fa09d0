"""The live view of a run: a table redrawn in place on a terminal, plain
timestamped lines otherwise (logs, CI, pipes)."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

from forge.base.text import one_line, printable, raw_stream
from forge.commands.status import fmt_seconds
from forge.run.state import RunState, Status


class LiveView:
    def __init__(self, *, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty() and not quiet
        self._live: Any = None
        self._state: RunState | None = None
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def __enter__(self) -> LiveView:
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            # rich writes its own control sequences; what it is given is escaped Text.
            self._live = Live(
                self._render(),
                console=Console(file=raw_stream(self.stream)),
                refresh_per_second=4,
                get_renderable=self._render,
            )
            self._live.__enter__()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(et, ev, tb)

    def on_change(self, state: RunState, task: str) -> None:
        with self._lock:
            self._state = state
            ts = state.tasks.get(task)
            if ts is not None and ts.status == Status.RUNNING:
                self._started.setdefault(task, time.monotonic())

    def on_event(self, message: str) -> None:
        if self.quiet:
            return
        if self._live is not None:
            from rich.text import Text

            line = Text(fmt_seconds(time.monotonic() - self._t0), style="dim")
            line.append(" " + printable(message))
            self._live.console.print(line)
        else:
            self.stream.write(f"[{fmt_seconds(time.monotonic() - self._t0):>7}] {message}\n")
            self.stream.flush()

    def _render(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, show_header=True)
        for col in ("task", "status", "elapsed", "reason"):
            table.add_column(col)
        state = self._state
        if state is None:
            return table
        now = time.monotonic()
        for ts in state.tasks.values():
            el = ""
            if ts.status == Status.RUNNING and ts.id in self._started:
                el = fmt_seconds(now - self._started[ts.id])
            elif ts.attempts and ts.attempts[-1].duration is not None:
                el = fmt_seconds(ts.attempts[-1].duration)
            # Text, not str: a cell string is markup to rich, and a reason is task data.
            table.add_row(
                Text(ts.id), Text(str(ts.status)), Text(el), Text(one_line(ts.reason)[:80])
            )
        return table
