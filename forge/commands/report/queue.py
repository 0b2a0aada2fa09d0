"""The report's "Gate now" section: the batch under verification (which tasks are
verified together, on top of which head), its step and an estimate of what is left,
the tasks queued behind it, and the gate's last verification that landed nothing.
A report written after the run shows the gate idle; the live page shows it move."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime
from html import escape

from forge.commands.status import fmt_seconds
from forge.commands.status_rows import GateView, gate_view
from forge.run.gate import story
from forge.run.state.run_state import RunState


def section(state: RunState) -> str:
    gate = gate_view(state)
    parts = [_batch(gate, state), _queued(gate)]
    told = story.lines(state.gate_last, head_verified=state.verification is not None)
    parts += [f'<p class="note">{escape(line)}</p>' for line in told]
    return "<section><h2>Gate now</h2>" + "".join(parts) + "</section>"


def _batch(gate: GateView, state: RunState) -> str:
    if not gate.batch:
        return "<p>idle: no batch under verification</p>"
    on = f" on top of <code>{escape(gate.head[:12])}</code>" if gate.head else ""
    step = "bisecting" if gate.phase == "bisecting" else "verifying"
    lines = [
        f"<p><b>{step}</b> {escape(', '.join(gate.batch))} together{on}"
        f" (a batch of {len(gate.batch)})</p>"
    ]
    if gate.doing:
        since = (
            f" since {datetime.fromtimestamp(gate.since, UTC):%H:%M:%S} UTC" if gate.since else ""
        )
        lines.append(f'<p class="note">now: {escape(gate.doing)}{since}</p>')
    left = gate.left if gate.phase == "bisecting" and gate.left else 1
    typical = _typical(state)
    if typical is not None:
        lines.append(
            f'<p class="note">ETA: about {fmt_seconds(typical * left)} '
            f"({left} verification(s) of about {fmt_seconds(typical)} each)</p>"
        )
    return "".join(lines)


def _typical(state: RunState) -> float | None:
    """The median time of the gate's finished verifications (None: none finished)."""
    took = [s.end - s.start for s in state.gate_steps if s.end is not None]
    return statistics.median(took) if took else None


def _queued(gate: GateView) -> str:
    if not gate.queued:
        return '<p class="note">nothing queued</p>'
    return f"<p>queued: {escape(', '.join(gate.queued))}</p>"
