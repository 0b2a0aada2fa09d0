"""Every folder forge made for a plan, by kind: what `forge status --disk` measures
and `forge clean` removes.

    task worktrees           <worktrees root>/<plan>/slot-*
    cluster cache            <worktrees root>/<plan>/.cluster (local:N workers' mirror, slots)
    verification checkouts   <worktrees root>/.verify/<plan> and .verify/<plan>.spec<i>
    cluster remote           <git common dir>/forge/cluster/<plan>.git
    agent state              $XDG_STATE_HOME/forge/<repository>/<plan> (the agents' homes)
    logs                     <git common dir>/forge/plans/<plan>/logs
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from forge.git import worktrees
from forge.git.repo import Repository

CLUSTER_CACHE = ".cluster"  # cluster/coordinator.py's LOCAL_CACHE (not imported: it is slow)
KINDS = (
    "task worktrees",
    "cluster cache",
    "verification checkouts",
    "cluster remote",
    "agent state",
    "logs",
)


@dataclass(frozen=True)
class Folder:
    kind: str
    path: Path


def is_plan_key(plan: str, key: str) -> bool:
    """Whether verification checkout key `key` is the plan's or its speculations'."""
    return key == plan or re.fullmatch(re.escape(plan) + r"\.spec\d+", key) is not None


def verification_keys(repo: Repository, plan: str) -> list[str]:
    """The plan's verification checkout keys found under the worktree root."""
    root = repo.worktrees_root() / ".verify"
    names = [p.name for p in root.iterdir()] if root.is_dir() else []
    return sorted(n for n in names if is_plan_key(plan, n))


def plan_folders(repo: Repository, plan: str) -> list[Folder]:
    from forge.run.attempt.confinement import agent_state_dir

    out = []
    slots = repo.worktrees_root() / plan
    for path in sorted(slots.iterdir()) if slots.is_dir() else []:
        out.append(
            Folder("cluster cache" if path.name == CLUSTER_CACHE else "task worktrees", path)
        )
    for key in verification_keys(repo, plan):
        out.append(Folder("verification checkouts", repo.worktrees_root() / ".verify" / key))
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


def disk_lines(use: dict[str, int] | None, size: Callable[[int], str]) -> list[str]:
    """`forge status --disk`: the plan's folders by kind (None: not measured)."""
    if use is None:
        return []
    if not use:
        return ["disk (measured now): nothing of the plan's on disk"]
    kinds = ", ".join(f"{kind} {size(n)}" for kind, n in use.items())
    return [f"disk (measured now): {size(sum(use.values()))} in all: {kinds}"]


def repository_disk_use(repo: Repository) -> dict[str, int]:
    """Everything forge keeps for this repository, measured now: every folder under its
    worktree root (every plan's slots, every verification checkout, the hooks' and
    `forge verify`'s included, whoever made them), its records in the git dir, and the
    agents' homes. `total` sums them."""
    from forge.run.attempt.confinement import agent_state_dir

    root = repo.worktrees_root()
    parts = {
        "worktree root": sorted(root.iterdir()) if root.is_dir() else [],
        "forge's records": [repo.state.root] if repo.state.root.is_dir() else [],
    }
    homes = agent_state_dir(repo, "-").parent.parent
    if homes.is_dir():
        parts["agent state"] = [homes]
    sizes = worktrees.disk_usages([p for paths in parts.values() for p in paths])
    use = {kind: sum(sizes.get(p, 0) for p in paths) for kind, paths in parts.items()}
    return {**use, "total": sum(use.values())}


def repository_disk_line(use: dict[str, int] | None, size: Callable[[int], str]) -> list[str]:
    if use is None:
        return []
    kinds = ", ".join(f"{kind} {size(n)}" for kind, n in use.items() if kind != "total")
    return [f"repository (measured now): {size(use['total'])} in all: {kinds}"]
