"""Every folder forge made for a plan, by kind: what `forge status --disk` measures
and `forge clean` removes.

    task worktrees           <worktrees root>/<plan>/slot-*
    cluster cache            <worktrees root>/<plan>/.cluster (local:N workers' mirror, slots)
    verification checkouts   the members of the verification pool the plan used
                             (<worktrees root>/.verify/shared-*, forge/verify/pool.py),
                             and .verify/<plan>, .verify/<plan>.spec<i> an older forge made
    cluster remote           <git common dir>/forge/cluster/<plan>.git
    agent state              $XDG_STATE_HOME/forge/<repository>/<plan> (the agents' homes)
    logs                     <git common dir>/forge/plans/<plan>/logs

The repository's total (`repository_use`) counts these for every plan, and what
belongs to no plan: the checkouts of the hooks and of `forge verify` outside a
plan, and forge's records (verdicts, history, every plan's logs). A member of the
verification pool is counted once: with the plans' checkouts when only plans used
it, else with the other checkouts.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path

from forge.frozen import frozen
from forge.git import worktrees
from forge.git.repo import Repository
from forge.verify.pool import plan_of, used_by, users

LAYERS = "layers"  # forge/layers/store.py: <state>/layers

CLUSTER_CACHE = ".cluster"  # cluster/coordinator.py's LOCAL_CACHE (not imported: it is slow)
KINDS = (
    "task worktrees",
    "cluster cache",
    "verification checkouts",
    "cluster remote",
    "agent state",
    "logs",
)


@frozen
class Folder:
    kind: str
    path: Path


def agent_state_dir(repo: Repository, plan: str) -> Path:
    """The agents' own per-task state (their CLI homes: `agent_env`'s `state_dir`),
    under `$XDG_STATE_HOME/forge` (default ~/.local/state/forge), one folder per
    repository and plan. Never under the repository: a task's git must not reach
    it, and Codex refuses to make its sandbox helper under a temporary folder."""
    root = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    where = str(repo.common_dir.resolve())
    key = f"{repo.root.name}-{hashlib.sha256(where.encode()).hexdigest()[:12]}"
    return Path(root) / "forge" / key / plan / "agent-state"


def is_plan_key(plan: str, key: str) -> bool:
    """Whether verification checkout key `key` is the plan's or its speculations'."""
    return key == plan or re.fullmatch(re.escape(plan) + r"\.spec\d+", key) is not None


def verification_keys(repo: Repository, plan: str) -> list[str]:
    """The plan's verification checkout keys found under the worktree root."""
    root = repo.worktrees_root() / ".verify"
    names = [p.name for p in root.iterdir()] if root.is_dir() else []
    return sorted(n for n in names if is_plan_key(plan, n))


def plan_folders(repo: Repository, plan: str) -> list[Folder]:
    out = []
    slots = repo.worktrees_root() / plan
    for path in sorted(slots.iterdir()) if slots.is_dir() else []:
        out.append(
            Folder("cluster cache" if path.name == CLUSTER_CACHE else "task worktrees", path)
        )
    for key in verification_keys(repo, plan):
        out.append(Folder("verification checkouts", repo.worktrees_root() / ".verify" / key))
    out += [Folder("verification checkouts", path) for path in used_by(repo, plan)]
    for kind, path in (
        ("cluster remote", repo.state.root / "cluster" / f"{plan}.git"),
        ("agent state", agent_state_dir(repo, plan).parent),
        ("logs", repo.state.logs_dir(plan)),
    ):
        if path.is_dir():
            out.append(Folder(kind, path))
    return out


def disk_use(repo: Repository, plan: str) -> dict[str, int]:
    """Bytes per kind, measured now; kinds with nothing on disk are left out."""
    use: dict[str, int] = {}
    for folder in plan_folders(repo, plan):
        use[folder.kind] = use.get(folder.kind, 0) + worktrees.disk_usage(folder.path)
    return {kind: use[kind] for kind in KINDS if kind in use}


REPOSITORY_KINDS = (
    "task worktrees",
    "plans' verification checkouts",
    "other checkouts",  # the hooks', `forge verify`'s outside a plan
    "verification layers",  # shared by every plan and hook (forge/layers/store.py)
    "records and logs",
    "agent state",
)


def repository_use(repo: Repository) -> dict[str, int]:
    """Bytes per kind of everything forge keeps for the repository, measured now."""
    root = repo.worktrees_root()
    plans = repo.state.recorded_plans()
    kinds: dict[Path, str] = {}
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.name != ".verify":
            kinds[path] = "task worktrees"
    verify = root / ".verify"
    # A member of the verification pool only plans used is theirs; one the hooks or
    # `forge verify` used too is counted with the other checkouts.
    pooled = {member for member, keys in users(repo).items() if keys and all(map(plan_of, keys))}
    for path in sorted(verify.iterdir()) if verify.is_dir() else []:
        ours = path.name in pooled or any(is_plan_key(plan, path.name) for plan in plans)
        kinds[path] = "plans' verification checkouts" if ours else "other checkouts"
    state = repo.state.root
    for path in sorted(state.iterdir()) if state.is_dir() else []:
        kinds[path] = "verification layers" if path.name == LAYERS else "records and logs"
    kinds[agent_state_dir(repo, "-").parent.parent] = "agent state"
    sizes = worktrees.disk_usages(list(kinds))
    use: dict[str, int] = {}
    for path, kind in kinds.items():
        if sizes[path]:
            use[kind] = use.get(kind, 0) + sizes[path]
    return {kind: use[kind] for kind in REPOSITORY_KINDS if kind in use}


def repository_lines(use: dict[str, int] | None, size: Callable[[int], str]) -> list[str]:
    """`forge status --disk`: the repository's total, every plan's and no plan's."""
    if not use:
        return []
    kinds = ", ".join(f"{kind} {size(n)}" for kind, n in use.items())
    return [f"repository (measured now): {size(sum(use.values()))} in all: {kinds}"]


def disk_lines(use: dict[str, int] | None, size: Callable[[int], str]) -> list[str]:
    """`forge status --disk`: the plan's folders by kind (None: not measured)."""
    if use is None:
        return []
    if not use:
        return ["disk (measured now): nothing of the plan's on disk"]
    kinds = ", ".join(f"{kind} {size(n)}" for kind, n in use.items())
    return [f"disk (measured now): {size(sum(use.values()))} in all: {kinds}"]
