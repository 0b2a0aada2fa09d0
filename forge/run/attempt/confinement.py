"""What a task's commands run under: the sandbox (when the run asks for it) and the
environment that keeps their git inside the slot. One place for the agent, setup,
check and reviewer of an attempt."""

from __future__ import annotations

from pathlib import Path

from forge.base.sandbox import Sandbox
from forge.git.contained import ceiling_env
from forge.git.repo import Repository

__all__ = ["ceiling_env", "sandbox_for"]


def sandbox_for(
    repo: Repository, logs: Path, cwd: Path, *, on: bool, writable: tuple[Path, ...] = ()
) -> Sandbox | None:
    """The sandbox of a command run in the slot `cwd` (None when the run has none):
    the slot, forge's per-plan agent state folder and `writable` may be written."""
    if not on:
        return None
    state_dir = logs.parent / "agent-state"  # the agents' own state (agent_env)
    state_dir.mkdir(parents=True, exist_ok=True)
    return Sandbox(writable=(cwd, state_dir, *writable), readable=(repo.root, repo.common_dir))
