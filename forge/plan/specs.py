"""The agent specs a plan names, checked before anything runs: a plan-level check, so
`forge plan` and `forge run` refuse the same plans with the same lines."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from forge.agents.names import AgentSpec
from forge.base.tomlread import TomlSource
from forge.errors import ForgeError, PlanError
from forge.plan.model import Plan

DEFAULT_AGENT = "claude"
AUTO = "auto"  # the agent chosen per task by cost per landed task (forge/run/records/routing.py)


def check_specs(
    plan: Plan, defs: Mapping[str, Mapping[str, object]], *, pool: Sequence[str] = ()
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
        raise PlanError(_lined(plan, defs, problems))


def _lined(plan: Plan, defs: Mapping[str, object], problems: list[str]) -> list[str]:
    """`problems` with its unknown agent names told at their lines, when the plan's
    file is there to read them from."""
    if plan.source is None or not plan.source.is_file():
        return problems
    lined = name_problems(plan.source, list(defs))
    return [p for p in problems if "unknown agent" not in p] + lined if lined else problems


def name_problems(path: Path, defined: Collection[str]) -> list[str]:
    """Every agent name in the plan file at `path` that names no agent, at its line and
    with the name it may have meant, read from the TOML itself: a plan with other
    mistakes is told of these in the same pass. `defined`: forge.toml's agents."""
    import tomllib

    from forge.agents.presets import PRESET_TABLES
    from forge.plan.names import did_you_mean

    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return []  # the plan's own reading says what is wrong with the file
    src = TomlSource(text)
    own: dict[str, object] = data["agents"] if isinstance(data.get("agents"), dict) else {}
    known = sorted({*PRESET_TABLES, *defined, *own})
    out = []

    def check(value: object, label: str, key: str, header: int | None) -> None:
        for spec in value if isinstance(value, list) else [value]:
            name = AgentSpec.of(spec).name if isinstance(spec, str) else None
            if not name or name == AUTO or name in known:
                continue
            line = src.key_line(key, header) or header
            at = f"{path}:{line}" if line else str(path)
            out.append(
                f"{at}: {label}{key}{_agent_word(label, key)} '{spec}': unknown agent "
                f"'{name}'{did_you_mean(name, known)}: "
                f"use one of {', '.join(known)}, or define [agents.{name}] in forge.toml or the plan"
            )

    for key in ("agent", "fallback", "review", "judge", "candidates", "auto"):
        check(data.get(key), "", key, None)
    tasks: list[object] = data["task"] if isinstance(data.get("task"), list) else []
    for n, task in enumerate(tasks):
        if isinstance(task, dict):
            label = f"task '{task.get('id')}': "
            for key in ("agent", "review", "judge", "candidates"):
                check(task.get(key), label, key, src.table_line("task", n))
    return out


def _resolve(spec: str, defs: Mapping[str, Mapping[str, object]]) -> None:
    """The agents' code is loaded only for a plan that names an agent."""
    from forge.agents import spec as agents

    agents.resolve(spec, defs)


def _agent_word(label: str, key: str) -> str:
    """The words earlier forges used: `fallback agent 'x'` and `review agent 'x'` at
    the plan's top, `task 't': review 'x'` and `candidates 'x'` elsewhere."""
    return " agent" if not label and key not in ("agent", "candidates") else ""
