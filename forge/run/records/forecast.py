"""The forecast `forge plan` prints from the attempts history: likely cost and
time, and the tasks that may bounce.

`forecast: ~$4.10 and ~35m for 12 tasks (from 80 attempts); may bounce: t3, t7`.
Per prompt task, its spec's record on tasks of its size (forge/run/records/routing.py
weighs them): the attempts it likely takes (one over the land rate), each at the
spec's mean cost and time; the time spread over the plan's parallelism. A task
whose first attempt is more likely to fail than to land may bounce. It needs
one earlier attempt of a spec the plan uses, and says nothing without; it is
advice, and never stops anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forge.base.files import JsonObject
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan.model import Plan, Task
from forge.plan.specs import AUTO, DEFAULT_AGENT
from forge.run.records import history, routing

BOUNCE = 0.5  # a first attempt's land rate below this: the task may bounce


@frozen
class Forecast:
    usd: float | None  # None: some spec's cost is unknown
    seconds: float
    tasks: int
    attempts: int  # history rows it is drawn from
    bounce: tuple[str, ...]

    def to_dict(self) -> JsonObject:
        return {
            "usd": None if self.usd is None else round(self.usd, 4),
            "seconds": round(self.seconds, 1),
            "tasks": self.tasks,
            "from_attempts": self.attempts,
            "may_bounce": list(self.bounce),
        }

    def line(self) -> str:
        cost = "cost unknown" if self.usd is None else f"~${self.usd:.2f}"
        text = (
            f"forecast: {cost} and ~{_span(self.seconds)} for {self.tasks} "
            f"task{'s' * (self.tasks != 1)} (from {self.attempts} attempt"
            f"{'s' * (self.attempts != 1)})"
        )
        return text + (f"; may bounce: {', '.join(self.bounce)}" if self.bounce else "")


def _span(seconds: float) -> str:
    """`40s`, `35m`, `2h05m`: a forecast's time, as rough as it is."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    return f"{minutes}m" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _specs(
    plan: Plan, task: Task, defs: Mapping[str, Mapping[str, object]], pool: Sequence[str]
) -> list[str]:
    from forge.agents import spec as agents

    text = task.agent or plan.agent or DEFAULT_AGENT
    texts = list(plan.auto or pool) if text == AUTO else [text]
    return [str(agents.resolve(t, defs)[1]) for t in texts]


def _mean(values: Sequence[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None) / len(values)


def _cost(arm: routing.Arm, rows: list[history.Row]) -> float | None:
    """Its mean cost per attempt; nothing for a spec that reports neither cost nor
    tokens (a script), unknown for one whose tokens have no price."""
    if arm.cost is not None:
        return arm.cost
    return None if any(r.input_tokens or r.output_tokens for r in rows) else 0.0


def forecast(repo: Repository, plan: Plan) -> Forecast | None:
    """The plan's forecast, or None without a recorded attempt of a spec it uses."""
    from forge.plan.repo_config import load_repo_config

    config = load_repo_config(repo.root)
    defs = plan.agent_tables(config.agents)
    prompt = [t for t in plan.tasks if t.run is None]
    wanted = {t.id: _specs(plan, t, defs, config.auto) for t in prompt}
    used = {s for specs in wanted.values() for s in specs}
    rows = [r for r in history.rows(repo.state) if r.agent in used]
    if not rows or not prompt:
        return None
    by: dict[str, list[history.Row]] = {}
    for r in rows:
        by.setdefault(r.agent, []).append(r)
    usd: float | None = 0.0
    seconds = 0.0
    bounce = []
    for task in prompt:
        size = routing.size_of(len(task.files), len(task.prompt or ""))
        arms = [a for a in routing.arms_for(wanted[task.id], rows, size) if a.spec in by]
        if not arms:  # none of its specs has run yet: the plan's others speak for it
            arms = routing.arms_for(sorted(by), rows, size)
        rate = max(sum((a.landed + 1) / (a.tried + 2) for a in arms) / len(arms), 0.05)
        cost = _mean([_cost(a, by[a.spec]) for a in arms])
        took = _mean([r.seconds for a in arms for r in by[a.spec] if r.spent_attempt]) or 0.0
        usd = None if usd is None or cost is None else usd + cost / rate
        seconds += took / rate
        if rate < BOUNCE:
            bounce.append(task.id)
    wide = max(1, min(plan.max_parallel, len(prompt)))
    return Forecast(usd, seconds / wide, len(prompt), len(rows), tuple(bounce))
