"""Every `forge run` and `forge retry` of a plan, kept in its run state: when each
started and ended, so the report tells nine invocations as nine (the timeline merges
those close together into one stretch of activity) and lists the gate's work of each.
"""

from __future__ import annotations

from dataclasses import dataclass

KEPT = 200  # invocations kept (the oldest go first)


@dataclass
class Invocation:
    started: str  # ISO time
    finished: str | None = None
    wall_seconds: float | None = None
