"""A plan that changes after some of its work merged, and an integration branch that
may not be forge's: said before anything is recorded or run.

Work that merged stays on the integration branch whatever the plan says later; so
recording a changed plan names the merged tasks it no longer has (their work is
still there) and the merged tasks whose definition changed (their old work is
there), with the command that acts on each.
"""

from __future__ import annotations

from forge.errors import ForgeError
from forge.git.refs import integration_ref
from forge.git.repo import Repository
from forge.plan.model import Plan, Task
from forge.run.state import events as ev
from forge.run.state.run_state import RunState, Status, TaskState
from forge.run.state.store import StateStore

START_MESSAGE = "forge: start integration"  # the reflog subject of the branch's creation


def changed_since_merge(ts: TaskState, task: Task) -> bool:
    return (
        ts.status == Status.MERGED
        and ts.merged_definition is not None
        and ts.merged_definition != task.definition()
    )


def explain(repo: Repository, plan: Plan) -> list[str]:
    """What recording `plan` means for the work of its run state (none: [])."""
    state = StateStore(repo.state, plan.name).load_existing()
    if state is None:
        return []
    branch = integration_ref(plan.name).removeprefix("refs/heads/")
    notes: list[str] = []
    for tid, ts in state.tasks.items():
        if ts.status != Status.MERGED:
            continue
        task = next((t for t in plan.tasks if t.id == tid), None)
        if task is None:
            notes.append(
                f"task `{tid}` merged and is no longer in the plan: its work stays on "
                f"{branch} (`forge clean {plan.name}` and run again to drop it)"
            )
        elif changed_since_merge(ts, task):
            notes.append(
                f"task `{tid}` changed since it merged: its old work stays on {branch} "
                f"(`forge retry {tid} --plan {plan.name} --fresh` runs it again on the current head)"
            )
    return notes


def _created_by_forge(repo: Repository, ref: str) -> bool:
    """The branch's oldest reflog entry is forge's own creation of it."""
    cp = repo.try_git("reflog", "show", "--format=%gs", ref, "--")
    entries = cp.stdout.strip().splitlines() if cp.returncode == 0 else []
    return bool(entries) and entries[-1].startswith(START_MESSAGE)


def check_integration_is_ours(repo: Repository, plan: str, state: RunState | None) -> None:
    """Refuse an integration branch forge did not make: adopting it would land the
    user's own commits as the plan's work."""
    ref = integration_ref(plan)
    if repo.ref_value(ref) is None or state is not None or _created_by_forge(repo, ref):
        return
    short = ref.removeprefix("refs/heads/")
    raise ForgeError(
        f"a branch `{short}` exists that forge did not create (no run state of plan "
        f"'{plan}' claims it); move it aside (`git branch -m {short} {short}-mine`) "
        f"and try again"
    )


def reopen_changed(store: StateStore, state: RunState, task: Task) -> bool:
    """`forge retry TASK --fresh` of a merged task whose definition changed: it runs
    again on the current integration head (its old work is already there)."""
    ts = state.tasks[task.id]
    if not changed_since_merge(ts, task):
        return False
    # Pinned at dispatch on the integration head, which holds the old work.
    store.record(
        state,
        ev.Reopened(ts.id, "its definition changed since it merged: running it again"),
        later=True,
    )
    return True
