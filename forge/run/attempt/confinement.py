"""What a task's commands run under: the sandbox (when the run asks for it) and the
environment that keeps their git inside the slot. One place for the agent, setup,
check and reviewer of an attempt."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from forge.base.sandbox import Sandbox
from forge.git.contained import ceiling_env
from forge.git.repo import Repository

__all__ = ["agent_state_dir", "ceiling_env", "sandbox_for"]


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


def sandbox_for(
    repo: Repository, logs: Path, cwd: Path, *, on: bool, writable: tuple[Path, ...] = ()
) -> Sandbox | None:
    """The sandbox of a command run in the slot `cwd` (None when the run has none):
    the slot, forge's per-plan agent state folder and `writable` may be written."""
    if not on:
        return None
    state_dir = agent_state_dir(repo, logs.parent.name)  # the agents' own state (agent_env)
    state_dir.mkdir(parents=True, exist_ok=True)
    return Sandbox(writable=(cwd, state_dir, *writable), readable=(repo.root, repo.common_dir))
