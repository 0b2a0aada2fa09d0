"""`forge stats`: what each agent spec costs per landed task, from the history.

Per spec as it ran (`name:model:effort`): attempts (those that spent one),
landed tasks, land rate, culprits, INFRA tries, cost (USD where known, tokens
otherwise), cost per landed task (everything spent on the spec, failed
attempts included, over the tasks it landed) and the median time from an
attempt's start to its landing. Shell tasks are one row of their own (`shell`):
counted like the rest, their cost is not applicable (`n/a`), never `$0.00`.
A spec whose CLI never named the model it ran (Codex, aider) has its model
mismatches `not checked` (null), not 0.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import TypedDict

from forge.base.durations import parse_duration
from forge.base.files import StateDir
from forge.base.text import text_table, usd
from forge.errors import ForgeError
from forge.plan.candidates import LOST
from forge.run.records import history
from forge.run.records.spend import per_landed_usd


def _k(n: int) -> str:
    return (
        f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)
    )


SHELL = "shell"  # the row of shell tasks (history records their attempts as "run")


class SpecStats(TypedDict):
    """One spec's row of `forge stats` (or the totals), as `--json` gives it."""

    agent: str
    attempts: int
    landed: int
    land_rate: float | None
    culprits: int
    infra: int
    cost_usd: float | None
    cost_applies: bool  # False: n/a (shell tasks), never $0.00
    unpriced_attempts: int
    input_tokens: int
    output_tokens: int
    cost_per_landed_usd: float | None
    median_seconds_to_land: float | None
    model_mismatches: int | None  # None: no attempt's CLI said which model ran


class Stats(TypedDict):
    """`forge stats --json`: a row per spec and the totals."""

    rows: list[SpecStats]
    totals: SpecStats
    plan: str | None
    since: str | None


def summarize(rows: Sequence[history.Row], agent: str) -> SpecStats:
    """One spec's (or, for the totals, every spec's) figures. A shell task costs
    nothing anyone bills: its row's cost is not applicable, and the totals' cost
    per landed task is the agents' cost over the tasks agents landed."""
    priced = [r for r in rows if r.agent != "run"]
    shell = not priced  # the shell row, or totals of shell tasks alone
    spent = [r for r in rows if r.spent_attempt]
    landed = {(r.plan, r.task) for r in rows if r.landed}
    landed_by_agents = {(r.plan, r.task) for r in priced if r.landed}
    known = [r.cost_usd for r in priced if r.cost_usd is not None]
    # Tokens without a price, or a best-of-N loser stopped before its CLI said.
    unknown = [
        r
        for r in priced
        if r.cost_usd is None
        and (r.input_tokens or r.output_tokens or (r.reason or "").startswith(LOST))
    ]
    # None when nothing was reported: n/a, as the run says, never $0.00.
    cost = round(sum(known), 6) if known and not shell else None
    times = [r.landed_at - r.started for r in rows if r.landed and r.landed_at]
    checked = [r for r in priced if r.models or r.model_mismatch]
    return {
        "agent": agent,
        "attempts": len(spent),
        "landed": len(landed),
        "land_rate": round(len(landed) / len(spent), 4) if spent else None,
        "culprits": sum(r.culprit for r in rows),
        "infra": sum(r.infra for r in rows),
        "cost_usd": cost,
        "cost_applies": not shell,  # False: n/a (shell tasks), never $0.00
        "unpriced_attempts": len(unknown),
        "input_tokens": sum(r.input_tokens or 0 for r in rows),
        "output_tokens": sum(r.output_tokens or 0 for r in rows),
        "cost_per_landed_usd": per_landed_usd(None if unknown else cost, len(landed_by_agents)),
        # None: no attempt's CLI said which model ran, so nothing was checked.
        "median_seconds_to_land": round(statistics.median(times), 3) if times else None,
        "model_mismatches": sum(1 for r in checked if r.model_mismatch) if checked else None,
    }


def stats_data(state: StateDir, *, plan: str | None, since: str | None) -> Stats:
    cutoff = None
    if since is not None:
        try:
            cutoff = time.time() - parse_duration(since)
        except (ValueError, ForgeError) as exc:
            raise ForgeError(f"--since {since!r} is not a duration (7d, 12h, 30m): {exc}") from None
    rows = history.rows(state, plan=plan, since=cutoff)
    drafts = history.draft_rows(state, plan=plan, since=cutoff)  # planners' tries
    if plan is not None and not rows and plan not in state.recorded_plans():
        known = state.recorded_plans()
        listing = ", ".join(known) if known else "none"
        raise ForgeError(f"no plan named '{plan}' is recorded (recorded: {listing})")
    by: dict[str, list[history.Row]] = {}
    for r in rows:
        by.setdefault(SHELL if r.agent == "run" else r.agent, []).append(r)
    for r in drafts:
        by.setdefault(f"{r.agent} (draft)", []).append(r)
    table = [summarize(rs, agent) for agent, rs in sorted(by.items())]
    return {
        "rows": table,
        "totals": summarize([*rows, *drafts], "total"),
        "plan": plan,
        "since": since,
    }


def _usd(value: float | None, row: SpecStats, *, tokens: bool) -> str:
    if not row["cost_applies"]:
        return "n/a"
    if value is not None:
        return usd(value)
    if tokens and (row["input_tokens"] or row["output_tokens"]):
        return f"{_k(row['input_tokens'])} in / {_k(row['output_tokens'])} out tok"
    return "unknown" if row["unpriced_attempts"] else "n/a"


def _mismatches(row: SpecStats) -> str:
    if not row["cost_applies"]:
        return "-"
    return "not checked" if row["model_mismatches"] is None else str(row["model_mismatches"])


def render(data: Stats) -> str:
    from forge.commands.status import fmt_seconds

    headers = ["agent", "attempts", "landed", "land rate", "culprits", "infra", "cost"]
    headers += ["per landed", "median to land", "model mismatches"]
    rows = []
    for r in [*data["rows"], data["totals"]] if data["rows"] else []:
        rate = "-" if r["land_rate"] is None else f"{r['land_rate']:.0%}"
        rows.append(
            [
                r["agent"],
                str(r["attempts"]),
                str(r["landed"]),
                rate,
                str(r["culprits"]),
                str(r["infra"]),
                _usd(r["cost_usd"], r, tokens=True),
                _usd(r["cost_per_landed_usd"], r, tokens=False) if r["landed"] else "-",
                fmt_seconds(r["median_seconds_to_land"]),
                _mismatches(r),
            ]
        )
    out = "\n".join(text_table(headers, rows)) + "\n"
    if not data["rows"]:
        out += "no attempts recorded yet\n"
    return out
