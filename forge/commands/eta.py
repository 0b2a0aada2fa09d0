"""When a run will end, for the live view.

From the finished attempts' time per unit of `estimate` (a task without one counts
1), including attempts of earlier runs of the plan (what similar tasks took before):
the work left is the unsettled tasks' estimates at that rate, less what their running
attempts already spent, shared by the slots. Until a few attempts have finished the
rate is uncertain, so the ETA is said as a range (`ETA 1m10s-3m05s`); then as one
figure (`ETA ~2m`). Before any attempt has finished there is none.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from forge.run.state.run_state import FAILURES, RunState, Status

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
        self.unsettled = 0

    def update(self, state: RunState, now: float) -> None:
        rates: list[float] = []
        running: list[tuple[float, float]] = []
        units = 0.0
        unsettled = 0
        for ts in state.tasks.values():
            w = self.weights.get(ts.id) or 1.0
            rates += [a.duration / w for a in ts.attempts if a.duration]
            if ts.status == Status.MERGED or ts.status in FAILURES:
                continue
            unsettled += 1
            units += w
            last = ts.last
            if ts.status == Status.RUNNING and last is not None and last.phases:
                running.append((w, max(0.0, now - float(last.phases[0]["start"]))))
        self.rates, self.left_units, self.running, self.unsettled = rates, units, running, unsettled

    def seconds(self, rate: float) -> float:
        slots = min(self.parallel, max(1, self.unsettled))
        # A running task has done what it spent, but never more than its expected time.
        done = sum(min(spent, w * rate) for w, spent in self.running)
        return max(0.0, self.left_units * rate - done) / slots

    def text(self) -> str:
        if not self.rates or not self.unsettled:
            return ""
        if len(self.rates) < SETTLED:
            low = self.seconds(min(self.rates) * RANGE[0])
            high = self.seconds(max(self.rates) * RANGE[1])
            return f"ETA {_fmt(low)}-{_fmt(high)}"
        return f"ETA ~{_fmt(self.seconds(statistics.median(self.rates)))}"
