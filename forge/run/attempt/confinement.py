"""What a task's commands run under: the sandbox (when the run asks for it) and the
environment that keeps their git inside the slot. One place for the agent, setup,
check and reviewer of an attempt, in a local slot or on a cluster worker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from forge.base import procgroup
from forge.base.sandbox import Sandbox
from forge.git.contained import Contained, ceiling_env, is_contained
from forge.git.repo import Repository
from forge.run.state.folders import agent_state_dir

__all__ = ["ceiling_env", "run_contained", "sandbox_for"]


def sandbox_for(
    repo: Repository,
    logs: Path,
    cwd: Path,
    *,
    writable: tuple[Path, ...] = (),
    network: bool = True,
) -> Sandbox:
    """The sandbox of a command run in the slot `cwd` (when the run has one): the
    slot, forge's per-plan agent state folder and `writable` may be written; the
    network is there when `network` (in a namespace of its own: the caller adds the
    plan's `host_ports` and the `sockets` it passes)."""
    state_dir = agent_state_dir(repo, logs.parent.name)  # the agents' own state (agent_env)
    state_dir.mkdir(parents=True, exist_ok=True)
    return Sandbox(
        writable=(cwd, state_dir, *writable),
        readable=(repo.root, repo.common_dir),
        network=network,
    )


def run_contained(
    repo: Repository,
    spec: procgroup.GroupSpec,
    *,
    stop: threading.Event,
    on_start: Callable[[int], None] | None = None,
) -> procgroup.GroupResult:
    """The one way an attempt runs a command: in a process group of its own, tagged,
    its output capped in its log, its git kept from climbing out of its `cwd`, the
    `.git` of the slot `cwd` (whose objects `repo` holds) saying what forge's does,
    and forge's records out of its sight (in the sandbox, else in a box)."""
    cwd = spec.cwd
    if is_contained(cwd):
        Contained(repo, cwd, strict=False).settle()
    env = {**ceiling_env(cwd), **(spec.env or {})}
    hide = spec.hide if spec.hide is not None else (repo.state.private_dir,)
    return procgroup.run_group(replace(spec, env=env, hide=hide), stop=stop, on_start=on_start)
