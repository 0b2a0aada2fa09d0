"""The names of forge's refs, in one place.

refs/heads/forge/<plan>-integration     a plan's integration branch
refs/heads/forge/<plan>/<task>          a task's branch
refs/forge/salvage/<plan>/<task>/<n>    work kept aside (never a branch)
"""

from __future__ import annotations

BRANCHES = "refs/heads/"
FORGE_BRANCHES = "refs/heads/forge/"
SALVAGE = "refs/forge/salvage/"


def integration_ref(plan: str) -> str:
    return f"{FORGE_BRANCHES}{plan}-integration"


def task_ref(plan: str, task: str) -> str:
    return f"{task_refs(plan)}{task}"


def task_refs(plan: str) -> str:
    """The prefix of every task branch of `plan` (for `for-each-ref`)."""
    return f"{FORGE_BRANCHES}{plan}/"


def task_of(plan: str, ref: str) -> str:
    """The task a task branch of `plan` belongs to."""
    return ref.removeprefix(task_refs(plan))


def salvage_refs(plan: str, task: str) -> str:
    """The prefix of the salvage refs of one task."""
    return f"{SALVAGE}{plan}/{task}/"


def branch_name(ref: str) -> str:
    """`refs/heads/forge/p/a` -> `forge/p/a`, as people type it."""
    return ref.removeprefix(BRANCHES)


def is_forge_branch(ref: str) -> bool:
    return ref.startswith(FORGE_BRANCHES)
