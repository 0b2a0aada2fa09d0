"""The report's time axis when a plan ran more than once: each run (a stretch of
activity) is drawn as a segment of its own, side by side, and the idle time
between runs is cut out (a marked break says how long it was), so a second run a
day later does not squeeze the first into a sliver."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

MIN_GAP = 30.0  # seconds of idle time before it can be a break between runs
GAP_SHARE = 0.10  # ... and at least this share of the active time
BREAK_SHARE = 0.02  # the width a break takes on the axis, as a share of the active time


@dataclass
class Clock:
    """Maps epoch seconds to the axis: active time keeps its length, breaks shrink."""

    origin: float = 0.0
    # (start of the idle stretch, its length, what it is cut to) in epoch seconds
    cuts: list[tuple[float, float, float]] = field(default_factory=list)
    active: float = 0.0  # seconds of activity (the runs' time, idle breaks left out)
    span: float = 0.0  # the axis's length in seconds

    @property
    def runs(self) -> int:
        return len(self.cuts) + 1

    def at(self, t: float) -> float:
        x = t - self.origin
        for start, length, width in self.cuts:
            if t >= start + length:
                x -= length - width
            elif t > start:
                x -= (t - start) - width * (t - start) / length
        return x

    def breaks(self) -> list[tuple[float, float]]:
        """(axis position, idle seconds) of each break, for its marker."""
        return [(self.at(start) + width / 2, length) for start, length, width in self.cuts]


def clock(intervals: Iterable[tuple[float, float]]) -> Clock:
    spans = sorted((s, max(s, e)) for s, e in intervals)
    if not spans:
        return Clock()
    merged: list[list[float]] = [list(spans[0])]
    for s, e in spans[1:]:
        if s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    active = sum(e - s for s, e in merged)
    floor = max(MIN_GAP, GAP_SHARE * active)
    width = max(BREAK_SHARE * active, 0.001)
    cuts = []
    for (_, end), (nxt, _) in itertools.pairwise(merged):
        if nxt - end > floor:
            cuts.append((end, nxt - end, width))
    c = Clock(origin=merged[0][0], cuts=cuts)
    c.span = c.at(merged[-1][1])
    # Time between runs that was not cut (short waits) still counts as the runs' time.
    c.active = merged[-1][1] - merged[0][0] - sum(length for _, length, _ in cuts)
    return c
