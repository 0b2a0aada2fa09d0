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
    where = plan.source or plan.name
    for what, spec in [("fallback", s) for s in plan.fallback] + [("review", plan.review)]:
        try:
            if spec is not None:
                agents.resolve(spec, defs)
        except ForgeError as exc:
            problems.append(f"{where}: {what} agent '{spec}': {exc.message}")
    for task in plan.tasks:
        if task.run is not None:
            continue
        for what, spec in (
            ("agent", task.agent or plan.agent or DEFAULT_AGENT),
            ("review", task.review if isinstance(task.review, str) else None),
        ):
            try:
                if spec is not None:
                    agents.resolve(spec, defs)
            except ForgeError as exc:
                problems.append(f"{where}: task '{task.id}': {what} '{spec}': {exc.message}")
    if problems:
        raise PlanError(problems)
