"""The agent specs a plan names, checked before anything runs: a plan-level check, so
`forge plan` and `forge run` refuse the same plans with the same lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge.errors import ForgeError, PlanError
from forge.plan.model import Plan

DEFAULT_AGENT = "claude"


def check_specs(plan: Plan, defs: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a plan whose prompt tasks name an agent, model or effort that does not
    resolve: one line per task, before anything is written."""
    from forge.agents import spec as agents

    problems = []
    for task in plan.tasks:
        if task.run is not None:
            continue
        spec = task.agent or plan.agent or DEFAULT_AGENT
        try:
            agents.resolve(spec, defs)
        except ForgeError as exc:
            where = plan.source or plan.name
            problems.append(f"{where}: task '{task.id}': agent '{spec}': {exc.message}")
    if problems:
        raise PlanError(problems)
