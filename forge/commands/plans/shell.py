"""`forge shell TASK`: open a shell in the worktree that holds a task's work (a
FAILED task's, to look at what its agent left), or run one command there.

The shell is the person's, not a task's: it runs outside the sandbox, in the slot's
folder, with `FORGE_PLAN`, `FORGE_TASK` and `FORGE_SLOT` set. A task that is running
is refused (its agent is still writing there), and a task whose work has merged or
was cleaned holds no worktree: each is one line saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from forge.errors import ForgeError
from forge.git.repo import Repository
from forge.run.state.run_state import RunState, Status, TaskState
from forge.run.state.store import StateStore


def slot_of(repo: Repository, plan: str, task: str) -> Path:
    """The folder holding `task`'s work (a best-of-N candidate `TASK+N` too)."""
    state = StateStore(repo.state, plan).load_existing()
    if state is None:
        raise ForgeError(f"plan '{plan}' has not run yet: run `forge run {plan}` first")
    ts = _task(state, plan, task)
    if ts.status == Status.RUNNING:
        raise ForgeError(
            f"task '{task}' is running: its agent is still writing there; wait for it, "
            "or `forge hold` and let it end"
        )
    slot = state.slots.get(ts.slot) if ts.slot else None
    if slot is None or not Path(slot.path).is_dir():
        said = "its work has merged" if ts.status == Status.MERGED else "it has none"
        raise ForgeError(f"task '{task}' holds no worktree ({said}): nothing to open")
    return Path(slot.path)


def _task(state: RunState, plan: str, task: str) -> TaskState:
    base, _, _ = task.partition("+")
    ts = state.tasks.get(base)
    if ts is not None and task != base:
        ts = ts.candidates.get(task)
    if ts is None:
        raise ForgeError(f"plan '{plan}' has no task '{task}'")
    return ts


def open_shell(repo: Repository, plan: str, task: str, command: str | None) -> int:
    """Run the person's shell (or `command` with `sh -c`) in the task's worktree; its
    exit status."""
    folder = slot_of(repo, plan, task)
    env = {**os.environ, "FORGE_PLAN": plan, "FORGE_TASK": task, "FORGE_SLOT": str(folder)}
    shell = os.environ.get("SHELL") or shutil.which("bash") or "/bin/sh"
    argv = ["/bin/sh", "-c", command] if command is not None else [shell]
    return subprocess.run(argv, cwd=folder, env=env, check=False).returncode
