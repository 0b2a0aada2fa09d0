"""Which plan (and task) a command means. A name or nothing is decided from the
recorded names alone, so a quick command reads no record; a plan file goes through
the registry, which refuses a file changed since it was recorded. The messages are
the registry's in every case."""

from __future__ import annotations

from forge.errors import ForgeError
from forge.git.repo import Repository
from forge.plan.names import did_you_mean, looks_like_path, recorded_name


def plan_name(repo: Repository, ref: str | None) -> str:
    """A recorded plan's name from a name, a plan file, or nothing (the one plan)."""
    name = recorded_name(repo.state.recorded_plans(), ref)
    if name is not None:
        return name
    from forge.plan.registry import resolve

    return resolve(repo, ref).plan.name


def status_target(
    repo: Repository, target: str | None, plan_ref: str | None, *, task: str | None = None
) -> tuple[str, str | None]:
    """`forge status [PLAN|TASK] [--plan P]` or `forge status PLAN TASK`: (plan, task
    or None). A lone argument is a plan when it is a recorded name or a file, else a
    task of the plan."""
    if task is not None:
        if plan_ref is not None:
            raise ForgeError(f"give the plan once: `forge status {target} {task}`")
        return plan_name(repo, target), task
    names = repo.state.recorded_plans()
    if target is not None and plan_ref is None and (target in names or looks_like_path(target)):
        return plan_name(repo, target), None
    if target is not None and plan_ref is None and len(names) > 1:
        return plan_of_task(repo, target, names), target
    return plan_name(repo, plan_ref), target


def plan_of_task(repo: Repository, target: str, names: list[str]) -> str:
    """The one recorded plan with a task `target`, or a message that says what
    `target` is not (and what it may have meant)."""
    from forge.plan.registry import load_recorded

    tasks = {name: [t.id for t in load_recorded(repo, name).plan.tasks] for name in names}
    holders = [name for name, ids in tasks.items() if target in ids]
    if len(holders) == 1:
        return holders[0]
    if holders:
        raise ForgeError(
            f"task '{target}' is in plans {', '.join(holders)}: name one with `--plan {holders[0]}`"
        )
    known = [*names, *(tid for ids in tasks.values() for tid in ids)]
    raise ForgeError(
        f"no plan or task named '{target}'{did_you_mean(target, known)} (plans: {', '.join(names)})"
    )
