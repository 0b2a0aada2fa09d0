"""Best-of-N in a plan: `candidates = [SPEC, ...]` runs a prompt task on each spec at
once, `best_of = N` runs its own spec N times; `select` says how the one that lands
is chosen and `judge` names an agent that chooses. A task's settings win over the
plan's.

Each candidate runs as a unit of its own, `<task>+<n>` (a name no task can have:
`+` is not allowed in an id), with its own branch, slot, log and record.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from forge.base.tomlread import LineOf, Problems, TomlSource
from forge.frozen import frozen
from forge.plan.repo_config import is_str_list

# A best-of-N loser's reason, stopped because another candidate landed.
LOST = "stopped: lost to "
# A best-of-N runner-up's reason: it passed, and another candidate landed.
NOT_CHOSEN = "passed, not chosen"

if TYPE_CHECKING:
    from forge.plan.model import Plan, Task

SEP = "+"  # between a task's id and its candidate's number


@frozen
class Candidate:
    label: str  # what people read: the spec, or `spec#i` with best_of
    spec: str  # the agent spec it runs
    unit: str  # `<task>+<n>`: its record, branch, slot and logs


@frozen
class BestOf:
    """The best-of-N keys of one table (the plan or a task), as read."""

    candidates: tuple[str, ...] | None = None
    best_of: int | None = None
    select: str | None = None
    judge: str | None = None


def read_best_of(
    table: Mapping[str, object], label: str, problems: Problems, line_of: LineOf
) -> BestOf:
    """`candidates`, `best_of`, `select` and `judge` of a plan or task table; each
    problem is added with its line."""
    where = "" if label == "plan" else f"{label}: "
    candidates = None
    if "candidates" in table:
        value = table["candidates"]
        if not is_str_list(value) or not all(v.strip() for v in value) or len(value) < 2:
            problems.add(
                f'{where}`candidates` must list two agent specs or more, e.g. ["claude", "codex"]',
                line=line_of("candidates"),
            )
        else:
            candidates = tuple(value)
    best_of = None
    if "best_of" in table:
        value = table["best_of"]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 16:
            problems.add(
                f"{where}`best_of` must be a whole number from 1 to 16, got {value!r}",
                line=line_of("best_of"),
            )
        else:
            best_of = value
    if candidates is not None and best_of is not None:
        problems.add(f"{where}set `candidates` or `best_of`, not both", line=line_of("best_of"))
    select = table.get("select")
    if select is not None and select not in ("first", "best"):
        problems.add(
            f'{where}`select` must be "first" or "best", got {select!r}', line=line_of("select")
        )
        select = None
    judge = table.get("judge")
    if judge is not None and (not isinstance(judge, str) or not judge.strip()):
        problems.add(f"{where}`judge` must be an agent spec", line=line_of("judge"))
        judge = None
    return BestOf(candidates, best_of, select, judge)


def candidates_of(plan: Plan, task: Task, default_agent: str = "claude") -> tuple[Candidate, ...]:
    """The candidates of `task` (none: it runs as one attempt at a time)."""
    if task.run is not None:
        return ()
    if task.candidates is not None:
        specs: tuple[str, ...] = task.candidates
    elif task.best_of is not None:
        specs = (task.agent or plan.agent or default_agent,) * task.best_of
    elif plan.candidates:
        specs = plan.candidates
    elif plan.best_of is not None:
        specs = (task.agent or plan.agent or default_agent,) * plan.best_of
    else:
        specs = ()
    if len(specs) < 2:
        return ()
    repeated = len(set(specs)) < len(specs)
    return tuple(
        Candidate(
            label=f"{spec}#{n}" if repeated else spec,
            spec=spec,
            unit=str(Unit(task.id, n)),
        )
        for n, spec in enumerate(specs, start=1)
    )


def select_of(plan: Plan, task: Task) -> str:
    return task.select or plan.select


def judge_of(plan: Plan, task: Task) -> str | None:
    return task.judge or plan.judge


@frozen
class Unit:
    """What runs as one: a task (`n` None), or its candidate `<task>+<n>`."""

    task: str
    n: int | None = None

    @classmethod
    def parse(cls, name: str) -> Unit:
        task, sep, n = name.rpartition(SEP)
        return cls(task, int(n)) if sep and task and n.isdigit() else cls(name)

    def __str__(self) -> str:
        return self.task if self.n is None else f"{self.task}{SEP}{self.n}"


def task_of_unit(unit: str) -> str:
    """The task a candidate unit belongs to (a task's own id stays as it is)."""
    return Unit.parse(unit).task


def is_unit(tid: str) -> bool:
    """Is `tid` a candidate's unit (not a task's own id)?"""
    return Unit.parse(tid).n is not None


def spec_problems(plan: Plan, defs: Mapping[str, Mapping[str, object]]) -> list[str]:
    """One line per candidate or judge spec that does not resolve, naming the file and
    the line of its `candidates` (or `judge`) entry. The agents' code is loaded, and
    the plan's file read again, only when there is a spec to resolve or to place."""
    from forge.errors import ForgeError

    where = str(plan.source or plan.name)
    out: list[str] = []

    @functools.cache
    def source() -> TomlSource | None:
        if plan.source is None:
            return None
        try:
            return TomlSource(plan.source.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return None

    def check(spec: str | None, key: str, task: Task | None, n: int) -> None:
        if spec is None:
            return
        from forge.agents import spec as agents

        try:
            agents.resolve(spec, defs)
        except ForgeError as exc:
            src = source()
            header = src.table_line("task", n) if src and task is not None else None
            line = src.key_line(key, header) if src else None
            at = f"{where}:{line}" if line else where
            label = f"task '{task.id}': " if task is not None else ""
            out.append(f"{at}: {label}{key} '{spec}': {exc.message}")

    for spec in plan.candidates:
        check(spec, "candidates", None, 0)
    check(plan.judge, "judge", None, 0)
    for n, task in enumerate(plan.tasks):
        for spec in task.candidates or ():
            check(spec, "candidates", task, n)
        check(task.judge, "judge", task, n)
    return out
