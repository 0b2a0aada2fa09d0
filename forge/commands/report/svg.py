"""The pictures of `forge report`, as inline SVG computed here (no script, no
library in the page): the DAG laid out by wave, and a timeline of bars per lane.

Every piece of text is escaped; nothing refers outside the page but relative links.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

STATUS_COLORS: Mapping[str, str] = {
    "MERGED": "#2e9d5b",
    "RUNNING": "#3b82c4",
    "QUEUED": "#7a6fd0",
    "PENDING": "#b8bec6",
    "BLOCKED": "#8d96a0",
    "FAILED": "#d9534f",
    "TIMEOUT": "#e07b39",
    "CONFLICT": "#c2559b",
    "INFRA": "#c9a227",
    "INTERRUPTED": "#9a7b4f",
}
# Known phases get a fixed colour; a phase another step adds gets one from its name.
PHASE_COLORS: Mapping[str, str] = {
    "worktree": "#c8ccd2",
    "setup": "#e6b450",
    "agent": "#3b82c4",
    "run": "#5aa0d8",
    "check": "#8e6cc9",
    "review": "#d16ba5",
    "queue": "#9aa5b1",
    "merge": "#2e9d5b",
    "attempt": "#7f8c99",
    "initial": "#4f9d8f",
    # the gate's steps: a batch and the head's run apart at a glance
    "batch": "#2f6db5",
    "head": "#d9822b",
    "bisection": "#8e44ad",
    "prefix": "#16a085",
    "speculation": "#7f8c8d",
    "rerun": "#e0a03a",
}
_SPARE = ["#6c8ebf", "#b85450", "#82b366", "#d79b00", "#9673a6", "#56517e", "#10739e"]


def phase_color(name: str) -> str:
    if name in PHASE_COLORS:
        return PHASE_COLORS[name]
    digest = hashlib.sha256(name.encode()).digest()
    return _SPARE[digest[0] % len(_SPARE)]


def status_color(status: str) -> str:
    return STATUS_COLORS.get(status, "#8d96a0")


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


# -- the DAG -------------------------------------------------------------------

NODE_W, NODE_H, COL_GAP, ROW_GAP, PAD = 150, 26, 60, 10, 24
MAX_ROWS = 12  # tasks in one column of a wave (more when a wave is very wide)


def dag_svg(
    waves: Sequence[Sequence[str]],
    deps: Mapping[str, Sequence[str]],
    status: Mapping[str, str],
    tips: Mapping[str, str],
) -> str:
    """Waves left to right, a wave's tasks top to bottom; a box per task in its
    status colour linking to its row; an edge per dependency."""
    # A wide wave folds into several columns, so 200 tasks in one wave stay a block
    # a screen can show rather than a column 7000 px tall.
    rows = max(MAX_ROWS, math.ceil(math.sqrt(max((len(w) for w in waves), default=0) * 3)))
    pos: dict[str, tuple[int, int]] = {}
    starts: list[int] = []  # the first column of each wave
    col = 0
    for wave in waves:
        starts.append(col)
        for i, tid in enumerate(_folded(wave, deps, rows)):
            c, row = col + i // rows, i % rows
            pos[tid] = (PAD + c * (NODE_W + COL_GAP), PAD + 18 + row * (NODE_H + ROW_GAP))
        col += max(1, math.ceil(len(wave) / rows))
    tallest = min(rows, max((len(w) for w in waves), default=0))
    width = PAD * 2 + max(1, col) * (NODE_W + COL_GAP) - COL_GAP
    height = PAD * 2 + 18 + max(1, tallest) * (NODE_H + ROW_GAP)
    out = [
        f'<svg class="dag" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="the plan\'s tasks by wave">'
    ]
    for n, first in enumerate(starts):
        x = PAD + first * (NODE_W + COL_GAP)
        out.append(f'<text class="wave" x="{x}" y="{PAD}">wave {n + 1}</text>')
    for tid, task_deps in deps.items():
        if tid not in pos:
            continue
        x2, y2 = pos[tid]
        for dep in task_deps:
            if dep not in pos:
                continue
            x1, y1 = pos[dep]
            sx, sy, ex, ey = x1 + NODE_W, y1 + NODE_H // 2, x2, y2 + NODE_H // 2
            mid = (sx + ex) // 2
            out.append(f'<path class="edge" d="M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}"/>')
    for tid, (x, y) in pos.items():
        st = status.get(tid, "PENDING")
        out.append(
            f'<a href="#task-{escape(tid)}"><g class="node"><title>{escape(tips.get(tid, tid))}'
            f'</title><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="4" '
            f'fill="{status_color(st)}"/><text x="{x + 8}" y="{y + 17}">'
            f"{escape(_short(tid, 20))}</text></g></a>"
        )
    out.append("</svg>")
    return "".join(out)


def _folded(wave: Sequence[str], deps: Mapping[str, Sequence[str]], rows: int) -> list[str]:
    """A wave that folds into several columns puts the tasks others depend on in its
    last columns and the tasks with dependencies in its first, so every edge goes left
    to right into the next wave instead of across the wave's own boxes."""
    if len(wave) <= rows:
        return list(wave)
    needed = {d for ds in deps.values() for d in ds}
    return sorted(wave, key=lambda tid: (tid in needed, not deps.get(tid)))


# -- the timeline --------------------------------------------------------------


@dataclass
class Bar:
    start: float  # seconds since the timeline's origin
    end: float
    name: str  # the phase (its colour)
    tip: str
    href: str | None = None  # a link (an anchor in the page)
    label: str = ""


@dataclass
class Lane:
    name: str
    bars: list[Bar] = field(default_factory=list)


LABEL_W, TRACK_W, LANE_H, AXIS_H = 150, 900, 20, 22


MIN_BAR = 3.0  # px: a phase of a second still shows on an hour-long axis
CHAR_W = 7.0  # px per character of the bars' and lanes' labels


def timeline_svg(
    lanes: Sequence[Lane], span: float, *, breaks: Sequence[tuple[float, float]] = ()
) -> str:
    """A row per lane, a bar per phase; `breaks` (axis seconds, idle seconds) mark the
    idle time cut out between two runs."""
    span = max(span, 0.001)
    scale = TRACK_W / span
    height = AXIS_H + len(lanes) * LANE_H + 8
    width = LABEL_W + TRACK_W + 16
    out = [
        f'<svg class="gantt" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="attempts and verification over time">'
    ]
    for i in range(6):  # an axis: six ticks over the span
        t = span * i / 5
        x = LABEL_W + t * scale
        out.append(
            f'<line class="tick" x1="{x:.1f}" y1="{AXIS_H - 4}" x2="{x:.1f}" y2="{height}"/>'
            f'<text class="axis" x="{x:.1f}" y="{AXIS_H - 8}" '
            f'text-anchor="{"start" if i == 0 else "end" if i == 5 else "middle"}">'
            f"{_clock(t)}</text>"
        )
    for at, idle in breaks:
        x = LABEL_W + at * scale
        out.append(
            f"<g><title>{escape(f'idle {_clock(idle)} between two runs')}</title>"
            f'<line class="break" x1="{x:.1f}" y1="{AXIS_H - 4}" x2="{x:.1f}" y2="{height}" '
            f'stroke="#555" stroke-dasharray="4 3"/></g>'
        )
    lane_chars = int((LABEL_W - 8) / CHAR_W)
    for row, lane in enumerate(lanes):
        y = AXIS_H + row * LANE_H
        out.append(
            f'<g><title>{escape(lane.name)}</title><text class="lane" x="4" y="{y + 14}">'
            f"{escape(_short(lane.name, lane_chars))}</text></g>"
        )
        for bar in lane.bars:
            x = LABEL_W + max(0.0, bar.start) * scale
            w = max(MIN_BAR, (bar.end - bar.start) * scale)
            rect = (
                f'<g><title>{escape(bar.tip)}</title><rect x="{x:.1f}" y="{y + 3}" '
                f'width="{w:.1f}" height="{LANE_H - 6}" fill="{phase_color(bar.name)}"/>'
            )
            chars = int((w - 6) / CHAR_W)
            if bar.label and chars >= 2:
                label = escape(_short(bar.label, chars))
                rect += f'<text class="bar" x="{x + 3:.1f}" y="{y + 14}">{label}</text>'
            rect += "</g>"
            out.append(f'<a href="{escape(bar.href)}">{rect}</a>' if bar.href else rect)
    out.append("</svg>")
    return "".join(out)


def _clock(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 or seconds == 0 else f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def legend(names: Sequence[str], colors: Mapping[str, str] | None = None) -> str:
    items = []
    for name in names:
        color = (colors or {}).get(name) or phase_color(name)
        items.append(
            f'<span class="key"><span class="swatch" style="background:{color}"></span>'
            f"{escape(name)}</span>"
        )
    return '<div class="legend">' + "".join(items) + "</div>"
