"""`select = "best"`: which of a task's passing candidates lands.

Every candidate that passed its check, scope and review is verified on top of the
integration head (the verdict cache answers a tree judged before); among those
that PASS (or are FLAKY) the one with the fewest changed lines lands, then the
lowest cost; with `judge = SPEC`, an agent chooses among them instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from forge.plan.candidates import Candidate
from forge.plan.model import Task
from forge.run.state.run_state import TaskState

if TYPE_CHECKING:
    from forge.run.attempt.context import RunContext


def changed_lines(ctx: RunContext, cts: TaskState) -> int:
    """Lines added and removed by the candidate's work against its base."""
    last = cts.last
    if last is None or last.commit is None or cts.base is None:
        return 1 << 30
    total = 0
    for line in ctx.repo.git(
        "diff", "--numstat", "--no-renames", cts.base, last.commit
    ).splitlines():
        added, removed, _ = line.split("\t", 2)
        # a binary file counts one line each way: it is a change all the same
        total += (int(added) if added.isdigit() else 1) + (int(removed) if removed.isdigit() else 1)
    return total


def cost(cts: TaskState) -> float:
    return sum(a.cost_usd or 0.0 for a in cts.attempts)


def choose(
    ctx: RunContext,
    task: Task,
    passed: Sequence[Candidate],
    recs: Mapping[str, TaskState],
    *,
    on_event: Callable[[str], None],
) -> Candidate | None:
    """The candidate to land among `passed` (None: none may)."""
    ranked = sorted(passed, key=lambda c: (changed_lines(ctx, recs[c.unit]), cost(recs[c.unit])))
    if not ranked:
        return None
    on_event(f"{task.id}: chose candidate {ranked[0].label} (fewest changed lines)")
    return ranked[0]
