"""`forge forget PLAN`: drop a cleaned plan's record (its recorded plan, run state,
logs), so `forge run` no longer finds it. Refused while the plan runs or still has
something `forge clean` has not dealt with: worktrees, task branches, an integration
branch not accepted. The attempts history keeps the plan's rows (`forge stats`).
"""

from __future__ import annotations

import os
import shutil

from forge.base.files import plan_lock
from forge.errors import ForgeError
from forge.git import refs
from forge.git.repo import Repository
from forge.run.state.folders import plan_folders
from forge.run.state.store import StateStore


def forget(repo: Repository, plan: str) -> str:
    if plan not in repo.state.recorded_plans():
        raise ForgeError(f"no plan named '{plan}' is recorded")
    with plan_lock(repo.state, plan, command="forge forget"):
        why = _still_there(repo, plan)
        if why:
            raise ForgeError(
                f"plan '{plan}' still has {why}: `forge clean {plan}` first "
                f"(`forge clean {plan} --dry-run` says what it removes)"
            )
        pdir = repo.state.plan_dir(plan)
        gone = pdir.with_name(f".forget-{plan}-{os.getpid()}")
        os.rename(pdir, gone)  # one step: the record is there, or it is not
    shutil.rmtree(gone, ignore_errors=True)
    return (
        f"forgot plan '{plan}' (its record, run state and logs); its attempts stay in `forge stats`"
    )


def _still_there(repo: Repository, plan: str) -> str:
    """What of the plan `forge clean` would still deal with ("" if nothing)."""
    integration = refs.integration_ref(plan)
    if repo.ref_value(integration) is not None:
        return f"its integration branch {refs.branch_name(integration)}"
    branches = repo.git("for-each-ref", "--format=%(refname:short)", refs.task_refs(plan)).split()
    if branches:
        return f"task branches ({', '.join(branches[:4])})"
    state = StateStore(repo.state, plan).load_existing()
    if state is not None and state.slots:
        return f"{len(state.slots)} worktree(s)"
    folders = [f for f in plan_folders(repo, plan) if f.kind != "logs"]
    if folders:
        return f"{folders[0].kind} in {folders[0].path}"
    return ""
