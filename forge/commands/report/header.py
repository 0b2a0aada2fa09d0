"""The head of a run's page: its name, verdict badge and facts (tasks, times, cost and
budget, base, integration, when it ran)."""

from __future__ import annotations

from html import escape

from forge.commands.report.axis import Clock
from forge.commands.status import fmt_seconds
from forge.plan.registry import Recorded
from forge.run.gate import story
from forge.run.records.spend import Spend, landed_by_agents, per_landed
from forge.run.state.run_state import Attempt, RunState, Status

WORK_PHASES = ("agent", "run")  # the phases that are the task's own work ("agent time")


def header(name: str, state: RunState, spend: Spend, recorded: Recorded, axis: Clock) -> str:
    counts: dict[str, int] = {}
    for ts in state.tasks.values():
        counts[str(ts.status)] = counts.get(str(ts.status), 0) + 1
    agent_time = sum(
        _phase_seconds(a, WORK_PHASES) for ts in state.tasks.values() for a in ts.every_attempt()
    )
    verdict, cls = story.outcome(state)  # the run's outcome, not only the head's
    facts = [
        ("tasks", ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))),
        ("wall time", _wall(state, axis)),
        ("agent time", fmt_seconds(agent_time)),
        (
            "cost",
            f"{spend.describe()}; {per_landed(spend, counts.get(Status.MERGED, 0), landed_by_agents(state))}",
        ),
        ("budget", _budget(recorded.plan.budget, spend)),
        ("base", f"{recorded.base_ref} @ {recorded.base_commit[:12]}"),
        ("integration", state.integration.removeprefix("refs/heads/")),
        _runs_fact(state),
    ]
    if state.paused:
        facts.append(("paused", state.paused))
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    return (
        f'<header><h1>{escape(name)} <span class="verdict v-{cls}">{escape(str(verdict))}'
        f'</span></h1><table class="facts">{rows}</table></header>'
    )


def _budget(budget: float | None, spend: Spend) -> str:
    if budget is None:
        return "none set"
    return f"{budget:g} USD ({spend.usd / budget:.0%} spent)" if budget else f"{budget:g} USD"


def _runs_fact(state: RunState) -> tuple[str, str]:
    """`run`: from the first invocation's start to the last one's end (`runs` and how
    many after several: the last invocation alone hid the earlier ones)."""
    first = state.invocations[0].started if state.invocations else state.started
    end = state.finished or "not finished"
    n = len(state.invocations)
    if n < 2:
        return "run", f"{first or '-'} \u2192 {end}"
    return "runs", f"{first} \u2192 {end} ({n} runs; the last from {state.started or '-'})"


def _wall(state: RunState, axis: Clock) -> str:
    """The last run's wall time; after several runs, their time together too (each
    invocation counts, however close to the one before)."""
    runs = max(len(state.invocations), axis.runs)
    if runs < 2:
        return fmt_seconds(state.wall_seconds)
    together = sum(i.wall_seconds or 0.0 for i in state.invocations)
    active = max(together, axis.active)
    return f"{fmt_seconds(active)} over {runs} runs (the last {fmt_seconds(state.wall_seconds)})"


def _phase_seconds(attempt: Attempt, names: tuple[str, ...]) -> float:
    if not attempt.phases:  # recorded before phases were: the whole attempt is work
        return attempt.duration or 0.0
    return float(sum((p.end or p.start) - p.start for p in attempt.phases if p.name in names))
