"""The results of a run: the table a person sees when it ends (one row a task and a
totals line), what it says after, and the run as JSON for `--json`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forge.commands.candidate_view import summary
from forge.commands.status import _branch_at, _table, fmt_seconds, touched_lines, verification_lines
from forge.commands.status_rows import row_of, task_row, warnings_now
from forge.run.gate import story
from forge.run.state.run_state import RunState, Status

if TYPE_CHECKING:
    from collections.abc import Mapping

    from forge.run.runner import RunReport

    Prices = Mapping[str, tuple[float, float]]


def results_table(state: RunState, *, width: int | None = None) -> str:
    """The tasks, one row each, and a totals line; each line cut to `width` with `…`."""
    rows = []
    attempts = 0
    seconds = 0.0
    for ts in state.tasks.values():
        r = row_of(ts)
        reason = ts.reason or "; ".join(warnings_now(ts))
        rows.append([ts.id, str(ts.status), str(r.attempts), fmt_seconds(r.seconds), reason])
        attempts += r.attempts
        seconds += r.total_seconds or 0.0
    merged = sum(1 for ts in state.tasks.values() if ts.status == Status.MERGED)
    # The time column of the totals is the run's wall time; the attempts' time added
    # up (several run at once) is said beside it.
    wall = fmt_seconds(state.wall_seconds) if state.wall_seconds is not None else "-"
    together = f"wall time; attempts {fmt_seconds(seconds)} together" if seconds else "wall time"
    rows.append(["total", f"{merged}/{len(state.tasks)} merged", str(attempts), wall, together])
    table = _table(["task", "status", "attempts", "time", "reason"], rows)
    return (
        table if width is None else "".join(cut(line, width) + "\n" for line in table.splitlines())
    )


def cut(line: str, width: int) -> str:
    """One line at most `width` characters: a longer one ends with `…`."""
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def report_data(report: RunReport, prices: Prices | None = None) -> dict[str, object]:
    """A finished run as data, for --json."""
    pre_existing = report.state.pre_existing
    return {
        "plan": report.plan,
        "exit_code": int(report.exit_code),
        "tasks": [task_row(t, prices) for t in report.state.tasks.values()],
        "verification": None if report.verification is None else report.verification.to_dict(),
        "integration": report.state.integration,
        "integration_head": report.integration_head,
        "paused": report.paused,
        "interrupted": report.interrupted,
        "recovered": report.recovered,
        "logs": str(report.logs),
        "wall_seconds": report.state.wall_seconds,
        "gate_verifications": report.gate_runs,  # verifications the gate ran (None: no gate)
        "gate_subset_runs": report.gate_subset_runs,  # runs of some tests only
        # the forgiven tests the verdict's whole run left out, each with why
        "forgiven": []
        if report.verification is None
        else [
            {"lane": lane, "test": test, "why": why}
            for lane, test, why in report.verification.deselected
        ],
        # what the head fails already
        "pre_existing": None if pre_existing is None else pre_existing.to_dict(),
        "touched": report.state.touched,
    }


def render_report(report: RunReport, *, width: int | None = None) -> str:
    """What a person sees when a run ends: the tasks, the verdict, where things are
    (the table cut to `width`, a terminal's, when given)."""
    state = report.state
    out = [results_table(state, width=width).rstrip("\n")]
    for ts in state.tasks.values():
        if ts.suggestion and ts.status != Status.MERGED:
            out.append(f"{ts.id}: {ts.suggestion}")
        if ts.candidates:
            out.append(f"{ts.id}: candidates: {summary(ts)}")
        out += [f"{ts.id}: salvaged work kept in {ref}" for ref in ts.salvage]
    if report.interrupted:
        out.append(f"interrupted: running tasks were stopped; `forge run {report.plan}` resumes")
    elif report.paused:
        out.append(f"paused: {report.paused}")
    else:
        out += verification_lines(report.verification)
        out += story.pre_existing_lines(state.pre_existing)
    out.append(f"integration: {_branch_at(state.integration, report.integration_head)}")
    out.append(f"logs: {report.logs}")
    out += touched_lines(state.touched)
    return "\n".join(out) + "\n"
