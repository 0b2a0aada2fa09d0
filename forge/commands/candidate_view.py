"""A best-of-N task's candidates as people and scripts see them: who won, who
failed and why, who was stopped, who passed and was not chosen; time and cost.

Read from the state alone (`TaskState.candidates`), so `forge status` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypedDict

from forge.base.text import one_line, text_table, usd
from forge.run.state.run_state import FAILURES, Attempt, Lost, Status, TaskState

if TYPE_CHECKING:
    from forge.agents.prices import Price


class Said(TypedDict):
    """What became of a candidate, in words."""

    outcome: str
    reason: str


class CandidateRow(Said):
    """One entry of `candidates` in `status TASK --json`."""

    agent: str | None
    unit: str
    cost_usd: float | None
    cost_known: bool
    seconds: float | None
    attempts: int
    salvage: str | None


def outcome(ts: TaskState, cts: TaskState) -> tuple[str, str]:
    """(outcome, reason) of one candidate of `ts`: won, failed, stopped, passed,
    queued, running, pending or interrupted."""
    landing = ts.last.candidate if ts.last is not None else None
    status, lost = cts.status, cts.last.lost if cts.last is not None else None
    if status == Status.MERGED:
        return "won", ""
    if status == Status.QUEUED:
        if lost == Lost.NOT_CHOSEN or ts.status == Status.MERGED:
            return "passed", "not chosen"
        if ts.status == Status.QUEUED and landing == cts.candidate:
            return "queued", "in the gate"
        return "passed", ""
    if status in FAILURES and lost == Lost.NOT_CHOSEN:  # (a runner-up, once another landed)
        return "passed", "not chosen"
    if status == Status.INTERRUPTED and lost == Lost.STOPPED:
        return "stopped", cts.reason.removeprefix("stopped: ")
    if status in FAILURES or status == Status.INFRA:
        return "failed", cts.reason or str(status)
    return str(status).lower(), cts.reason


def candidate_rows(ts: TaskState, prices: Mapping[str, Price] | None = None) -> list[CandidateRow]:
    """`candidates` of `status TASK --json`: one entry per candidate (per instance
    with `best_of`). Its cost is what its CLI reported, else its tokens priced
    (Codex reports no USD); `cost_known` is false when some of it is unknown (a
    loser stopped before its CLI said what it spent, or tokens without a price)."""
    from forge.agents.prices import DEFAULT_PRICES
    from forge.run.records.spend import spend_of

    rows: list[CandidateRow] = []
    for cts in ts.candidates.values():
        what, why = outcome(ts, cts)
        spend = spend_of(cts.attempts, DEFAULT_PRICES if prices is None else prices)
        times = [a.duration for a in cts.attempts if a.duration is not None]
        rows.append(
            {
                "agent": cts.candidate,
                "unit": cts.id,
                "outcome": what,
                "reason": why,
                "cost_usd": round(spend.usd, 6) if spend.priced else None,
                "cost_known": not spend.unpriced,
                "seconds": round(sum(times), 3) if times else None,
                "attempts": len(cts.attempts),
                "salvage": cts.salvage[-1] if cts.salvage else None,
            }
        )
    return rows


def describe(row: Said) -> str:
    """`won`, `failed: check failed: ...`, `stopped: lost to codex`, `passed, not chosen`."""
    return (
        f"{row['outcome']}, {row['reason']}"
        if row["outcome"] == "passed" and row["reason"]
        else (f"{row['outcome']}: {row['reason']}" if row["reason"] else row["outcome"])
    )


def candidate_lines(
    rows: list[CandidateRow], fmt_seconds: Callable[[float | None], str]
) -> list[str]:
    """The candidates table under a task's attempts in `forge status TASK`."""
    if not rows:
        return []
    table = [
        [
            str(r["agent"]),
            one_line(describe(r)),
            fmt_seconds(r["seconds"]),
            _cost(r),
            r["salvage"] or "",
        ]
        for r in rows
    ]
    return ["candidates:"] + [
        "  " + line
        for line in text_table(["candidate", "outcome", "time", "cost", "salvage"], table)
    ]


def _cost(row: CandidateRow) -> str:
    shown = "" if row["cost_usd"] is None else usd(row["cost_usd"], 4)
    if row["cost_known"]:
        return shown
    return f"{shown} + unknown" if shown else "unknown"


def summary(ts: TaskState) -> str:
    """One line naming the winner and each other candidate's outcome (the report)."""
    return "; ".join(f"{r['agent']} {describe(r)}" for r in candidate_rows(ts))


def timeline_attempts(tid: str, ts: TaskState) -> list[tuple[str, Attempt]]:
    """Every attempt to draw in the timeline, each named: the task's own, then each
    candidate's as `<task> <candidate>`."""
    out = [(tid, a) for a in ts.attempts]
    for cts in ts.candidates.values():
        out += [(f"{tid} {cts.candidate}", a) for a in cts.attempts]
    return out


def live_lines(ts: TaskState, wall: float) -> list[str]:
    """A running best-of-N task's candidates, under its row in the live view."""
    from forge.run.attempt.phases import current

    out = []
    for cts in ts.candidates.values():
        phase = current(cts.last) if cts.status == Status.RUNNING else None
        if phase is not None:
            what = f"{phase.name} {wall - phase.start:.0f}s"
        else:
            what = describe(candidate_rows_one(ts, cts))
        out.append(f"    {cts.candidate or cts.id:<22} {one_line(what)}")
    return out


def candidate_rows_one(ts: TaskState, cts: TaskState) -> Said:
    what, why = outcome(ts, cts)
    return {"outcome": what, "reason": why}
