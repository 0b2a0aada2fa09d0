"""The live view of a run.

On a terminal: a summary line (counts per status, cost, elapsed, an ETA), a line
for the gate when it verifies, and the running and recently finished tasks, cut to
the terminal's height and width and redrawn in place; it is transient, so when the
run ends it is cleared and the results table is printed once. The run's event lines
go to its log (`events.log` in the run's logs folder), not to the terminal.
Otherwise (logs, CI, pipes): plain timestamped lines, and the same log.

A redraw must cost the same for 10 tasks as for 1000: it draws at most a screenful
from what `on_change` keeps up to date (the running tasks, the last finished
ones), and counts the plan's statuses at most once a second.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

from forge.base.text import one_line, raw_stream, usd
from forge.commands.candidate_view import live_lines
from forge.commands.status import doing_text, fmt_seconds
from forge.commands.status_rows import GateView, gate_view, shown_status
from forge.run.attempt.phases import current
from forge.run.capacity import CAP_EVENT
from forge.run.records.spend import Spend, spend_of
from forge.run.state.gate_record import GatePhase
from forge.run.state.run_state import FAILURES, RunState, Status, TaskState

if TYPE_CHECKING:
    from rich.live import Live
    from rich.text import Text

RECENT = 50  # finished tasks remembered for the view (a screen holds fewer)
RECOUNT = 1.0  # seconds between two full counts of the plan's statuses
ORDER = [Status.MERGED, Status.RUNNING, *sorted(FAILURES), Status.BLOCKED, Status.PENDING]


class LiveView:
    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        quiet: bool = False,
        weights: Mapping[str, float] | None = None,
        prices: Mapping[str, tuple[float, float]] | None = None,
        parallel: int = 1,
        event_log: Path | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty() and not quiet
        self.weights = dict(weights or {})
        self.prices = dict(prices or {})
        self._live: Live | None = None
        self._state: RunState | None = None
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._running: dict[str, TaskState] = {}
        self._recent: deque[TaskState] = deque(maxlen=RECENT)
        self._counts: Counter[str] = Counter()
        self._counted = 0.0
        self._usd: dict[str, Spend] = {}  # per task, so a change costs one task's attempts
        self.eta = Eta(self.weights, parallel)
        self._gate: GateView | None = None  # the gate, recounted with the statuses
        self._caps: dict[str, str] = {}  # agent -> its cap after rate limits
        self.event_log = event_log
        self._log: TextIO | None = None

    def __enter__(self) -> LiveView:
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            # rich writes its own control sequences; what it is given is escaped Text.
            live = Live(
                console=Console(file=raw_stream(self.stream)),
                refresh_per_second=2,
                get_renderable=self._render,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            live.__enter__()
            self._live = live
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(et, ev, tb)
        if self._log is not None:
            self._log.close()

    def on_change(self, state: RunState, task: str) -> None:
        if not self.tty:
            return  # only the terminal view draws from it
        with self._lock:
            self._state = state
            task = state.owner(task)  # a best-of-N candidate: its task's row
            ts = state.tasks.get(task)
            if ts is None:
                return
            self._usd[task] = spend_of(ts.every_attempt(), self.prices)
            if ts.status == Status.RUNNING:
                self._running[task] = ts
            elif self._running.pop(task, None) is not None:
                self._recent.appendleft(ts)  # read when drawn: its duration comes later

    def on_event(self, message: str) -> None:
        self._note_cap(message)
        line = f"[{fmt_seconds(time.monotonic() - self._t0):>7}] {message}\n"
        self._to_log(line)
        if self.quiet or self._live is not None:
            return  # on a terminal the live area says what runs; the log keeps the events
        self.stream.write(line)
        self.stream.flush()

    def _note_cap(self, message: str) -> None:
        """Keep an agent's cap while a rate limit holds it below its max_parallel."""
        if not message.startswith(CAP_EVENT):
            return
        said = message.removeprefix(CAP_EVENT)
        agent = said.split(" ", 1)[0]
        with self._lock:
            if " back to " in said or said.endswith("no longer capped"):
                self._caps.pop(agent, None)
            else:
                self._caps[agent] = said

    def cap_line(self) -> str:
        return CAP_EVENT + " · ".join(self._caps.values()) if self._caps else ""

    def _to_log(self, line: str) -> None:
        if self.event_log is None:
            return
        with self._lock:
            try:
                if self._log is None:
                    self.event_log.parent.mkdir(parents=True, exist_ok=True)
                    self._log = self.event_log.open("a", encoding="utf-8", errors="replace")
                self._log.write(line)
                self._log.flush()
            except OSError:
                self.event_log = None  # a log that cannot be written never stops a run

    # -- drawing ---------------------------------------------------------------

    def _recount(self, now: float) -> None:
        state = self._state
        if state is None or now - self._counted < RECOUNT:
            return
        self._counted = now
        self._counts = Counter(shown_status(ts) for ts in state.tasks.values())
        self.eta.update(state, time.time())
        self._gate = gate_view(state)

    def summary(self, now: float) -> str:
        elapsed = now - self._t0
        counts = self._counts
        parts = [f"{counts[s]} {s.lower()}" for s in ORDER if counts.get(s)]
        parts += [f"{n} {s.lower()}" for s, n in counts.items() if s not in ORDER and n]
        spend = sum(self._usd.values(), Spend())
        if spend.unpriced:  # a price unknown is not zero
            parts.append(f"{usd(spend.usd)} + unknown" if spend.priced else "cost unknown")
        elif spend.usd:
            parts.append(usd(spend.usd))
        parts.append(f"{fmt_seconds(elapsed)} elapsed")
        eta = self.eta.text()
        if eta:
            parts.append(eta)
        return "  ".join(parts)

    def lines(self, height: int, width: int | None = None) -> list[str]:
        """What the view shows, at most `height` lines (the gate's line fitted to
        `width`, its elapsed time kept)."""
        now = time.monotonic()
        with self._lock:
            self._recount(now)
            out = [self.summary(now)]
            gate = gate_line(self._gate, width) if self._gate is not None else ""
            if gate:
                out.append(gate)
            if self._caps:
                out.append(self.cap_line())
            wall = time.time()
            for tid, ts in list(self._running.items())[: max(0, height - 1)]:
                phase = current(ts.last)
                what = (
                    f"{phase.name} {fmt_seconds(wall - phase.start)}"
                    if phase
                    else f"best of {len(ts.candidates)}"
                    if ts.candidates
                    else "starting"
                )
                out.append(f"  {tid:<24} RUNNING  {what}")
                out += live_lines(ts, wall)  # best-of-N: its candidates under it
            shown = set(self._running)
            for ts in self._recent:
                if len(out) >= height:
                    break
                if ts.id in shown:
                    continue
                shown.add(ts.id)
                last = ts.last
                duration = fmt_seconds(last.duration if last else None)
                # The terminal cuts the line to its width, with `…`.
                out.append(
                    f"  {ts.id:<24} {shown_status(ts):<8} {duration:>7}  {one_line(ts.reason)}"
                )
        return out[:height]

    def _render(self) -> Text:
        from rich.text import Text

        size = self._live.console.size if self._live is not None else None
        height, width = (size.height, size.width) if size is not None else (24, None)
        # Room for the lines printed above the view, and rich's own last line.
        text = "\n".join(self.lines(max(2, height - 2), width))
        return Text(text, no_wrap=True, overflow="ellipsis")


def gate_line(gate: GateView, width: int | None = None) -> str:
    """`gate: verifying t12, t02 (batch of 2) · bisection step 1 of at most 2: running
    1 failing test(s) (tests/test_a.py::test_b) on 1a2b3c4d5e6f (lane unit run 1) for
    3.0s · 3 queued`: what the gate runs now (the whole suite or some failing tests,
    the lane's setup or its run k of n, the bisection's step) and for how long. Past
    `width` the middle of what runs is cut (`…`), never the time it has run."""
    batch = gate.batch or []
    queued = gate.queued
    if not batch and not queued:
        return ""

    def line(doing: str) -> str:
        parts = []
        if batch:
            parts.append(f"gate: verifying {', '.join(batch)} (batch of {len(batch)})")
            bisecting = gate.phase == "bisecting" and gate.left
            if bisecting and not doing.startswith("bisection step"):
                parts.append(f"bisection: at most {gate.left} more")
            if doing:
                parts.append(doing_text(replace(gate, doing=doing)).removeprefix(": "))
        else:
            parts.append("gate: waiting")
        if queued:
            parts.append(f"{len(queued)} queued")
        return " · ".join(parts)

    doing = gate.doing or ""
    said = line(doing)
    over = len(said) - width if width is not None else 0
    if over > 0 and doing and batch:
        keep = max(12, len(doing) - over - 1)
        said = line(doing[:keep].rstrip() + "…") if keep < len(doing) else said
    return said


# --- the ETA ----------------------------------------------------------------------
# When a run will end, for the live view.
#
# From the finished attempts' time per unit of `estimate` (a task without one counts
# 1), including attempts of earlier runs of the plan (what similar tasks took before):
# the work left is the unsettled tasks' estimates at that rate, less what their running
# attempts already spent, shared by the slots. Until a few attempts have finished the
# rate is uncertain, so the ETA is said as a range (`ETA 1m10s-3m05s`); then as one
# figure (`ETA ~2m`). Before any attempt has finished there is none. The gate's work
# counts too: while tasks wait for it or run, one more verification, of the length
# the gate's verifications took so far in the plan (less what the one under way has
# already taken).

SETTLED = 3  # finished attempts before the ETA is one figure
RANGE = (0.67, 1.5)  # the band around the rate's extremes while it settles


def _fmt(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


class Eta:
    def __init__(self, weights: Mapping[str, float], parallel: int) -> None:
        self.weights = dict(weights)
        self.parallel = max(1, parallel)
        self.rates: list[float] = []  # seconds per unit of estimate, one per finished attempt
        self.left_units = 0.0  # estimate units of the unsettled tasks
        self.running: list[tuple[float, float]] = []  # (estimate, seconds spent) per running task
        self.unsettled = 0  # tasks with work left (not settled, not waiting for the gate)
        self.verify_left: float | None = 0.0  # seconds of verification ahead (None: unknown)

    def update(self, state: RunState, now: float) -> None:
        rates: list[float] = []
        running: list[tuple[float, float]] = []
        units = 0.0
        unsettled = 0
        waiting = False  # a task waits for the gate, or runs and will
        for ts in state.tasks.values():
            w = self.weights.get(ts.id) or 1.0
            rates += [a.duration / w for a in ts.attempts if a.duration]
            if ts.status == Status.MERGED or ts.status in FAILURES:
                continue
            waiting = True
            if ts.status == Status.QUEUED:
                continue  # its work is done: what is left of it is the gate's
            unsettled += 1
            units += w
            last = ts.last
            if ts.status == Status.RUNNING and last is not None and last.phases:
                running.append((w, max(0.0, now - last.phases[0].start)))
        self.rates, self.left_units, self.running, self.unsettled = rates, units, running, unsettled
        self.verify_left = _verification_left(state, now) if waiting else 0.0

    def seconds(self, rate: float) -> float:
        slots = min(self.parallel, max(1, self.unsettled))
        # A running task has done what it spent, but never more than its expected time.
        done = sum(min(spent, w * rate) for w, spent in self.running)
        return max(0.0, self.left_units * rate - done) / slots

    def text(self) -> str:
        # A verification of unknown length (none has finished yet) is named, not 0 s.
        tail = self.verify_left or 0.0
        more = " + a verification" if self.verify_left is None else ""
        if not self.unsettled:
            if more:
                return "ETA: when the verification under way ends (the plan's first)"
            return f"ETA ~{_fmt(tail)}" if tail >= 1 else ""
        if not self.rates:
            return ""
        if len(self.rates) < SETTLED:
            low = self.seconds(min(self.rates) * RANGE[0]) + tail
            high = self.seconds(max(self.rates) * RANGE[1]) + tail
            if high < 1 and not more:
                return ""  # nothing worth a figure is left
            if _fmt(low) == _fmt(high):
                return f"ETA ~{_fmt(high)}{more}"
            return f"ETA {_fmt(low)}-{_fmt(high)}{more}"
        import statistics  # (its import costs every run's start)

        return f"ETA ~{_fmt(self.seconds(statistics.median(self.rates)) + tail)}{more}"


def _verification_left(state: RunState, now: float) -> float | None:
    """Seconds of the gate's verification still ahead: one more of the median length
    its finished verifications took (or the head's last verification's, from an
    earlier run), less what the one under way has taken, and one more such for each
    step a bisection may still need. None: no verification's length is known yet."""
    took = sorted(s.end - s.start for s in state.gate_steps if s.end is not None)
    if took:
        typical = took[len(took) // 2]
    elif state.verification is not None and state.verification.duration:
        typical = state.verification.duration
    elif state.gate is not None or any(ts.status == Status.QUEUED for ts in state.tasks.values()):
        return None  # the gate verifies, or will: for how long, nothing says yet
    else:
        return 0.0
    gate = state.gate
    # What runs now started when the gate said so (a step of an earlier run that
    # never ended, killed, is not under way: the ETA froze on it).
    this_run = len(state.invocations) - 1
    under_way = [s.start for s in state.gate_steps if not s.end and s.run in (None, this_run)]
    since = (
        gate.since if gate is not None and gate.since is not None else max(under_way, default=None)
    )
    spent = now - since if since is not None else 0.0
    steps = (gate.left or 0) if gate is not None and gate.phase == GatePhase.BISECTING else 0
    return max(0.0, typical - spent) + steps * typical
