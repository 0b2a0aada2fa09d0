"""The agent specs a plan names, checked before anything runs: a plan-level check, so
`forge plan` and `forge run` refuse the same plans with the same lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from forge.errors import ForgeError, PlanError
from forge.plan.model import Plan

DEFAULT_AGENT = "claude"
AUTO = "auto"  # the agent chosen per task by cost per landed task (forge/run/routing.py)


def check_specs(
    plan: Plan, defs: Mapping[str, Mapping[str, Any]], *, pool: Sequence[str] = ()
) -> None:
    """Refuse a plan whose prompt tasks name an agent, model or effort that does not
    resolve: one line per task, before anything is written. `pool` is forge.toml's
    `auto`, for a plan that names none."""
    problems = []
    where = plan.source or plan.name
    autos = [("auto", s) for s in plan.auto or pool]
    if not autos and any((t.agent or plan.agent) == AUTO for t in plan.tasks if t.run is None):
        problems.append(
            f'{where}: agent "auto" needs a pool: auto = ["claude:sonnet", "codex", ...] '
            "in the plan or forge.toml"
        )
    for what, spec in [("fallback", s) for s in plan.fallback] + [("review", plan.review)] + autos:
        try:
            if spec is not None:
                _resolve(spec, defs)
        except ForgeError as exc:
            problems.append(f"{where}: {what} agent '{spec}': {exc.message}")
    from forge.plan.candidates import spec_problems

    problems += spec_problems(plan, defs)
    for task in plan.tasks:
        if task.run is not None:
            continue
        own = None if task.candidates else task.agent or plan.agent or DEFAULT_AGENT
        for what, spec in (
            ("agent", own),
            ("review", task.review if isinstance(task.review, str) else None),
        ):
            try:
                if spec is not None and not (what == "agent" and spec == AUTO):
                    _resolve(spec, defs)
            except ForgeError as exc:
                problems.append(f"{where}: task '{task.id}': {what} '{spec}': {exc.message}")
    if problems:
        raise PlanError(problems)


def _resolve(spec: str, defs: Mapping[str, Mapping[str, Any]]) -> None:
    """The agents' code is loaded only for a plan that names an agent."""
    from forge.agents import spec as agents

    agents.resolve(spec, defs)
