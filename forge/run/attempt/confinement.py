"""What a task's commands run under: the sandbox (when the run asks for it) and the
environment that keeps their git inside the slot. One place for the agent, setup,
check and reviewer of an attempt, in a local slot or on a cluster worker."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
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
    on: bool,
    writable: tuple[Path, ...] = (),
    network: bool = True,
    sockets: tuple[str, ...] = (),
) -> Sandbox | None:
    """The sandbox of a command run in the slot `cwd` (None when the run has none):
    the slot, forge's per-plan agent state folder and `writable` may be written;
    the network is there when `network`, and the `sockets` the plan passes."""
    if not on:
        return None
    state_dir = agent_state_dir(repo, logs.parent.name)  # the agents' own state (agent_env)
    state_dir.mkdir(parents=True, exist_ok=True)
    return Sandbox(
        writable=(cwd, state_dir, *writable),
        readable=(repo.root, repo.common_dir),
        network=network,
        sockets=sockets,
    )


def run_contained(
    argv: Sequence[str] | str,
    *,
    repo: Repository,
    cwd: Path,
    log: Path,
    env: Mapping[str, str],
    timeout: float | None,
    grace: float,
    tag: str | None,
    cap: int | None,
    stop: threading.Event,
    input_path: Path | None = None,
    sandbox: Sandbox | None = None,
    on_start: Callable[[int], None] | None = None,
) -> procgroup.GroupResult:
    """The one way an attempt runs a command: in a process group of its own, tagged,
    its output capped in its log, its git kept from climbing out of `cwd`, and the
    `.git` of the slot `cwd` (whose objects `repo` holds) saying what forge's does."""
    if is_contained(cwd):
        Contained(repo, cwd, strict=False).settle()
    return procgroup.run_group(
        procgroup.GroupSpec(
            argv,
            cwd=cwd,
            log_path=log,
            env={**ceiling_env(cwd), **env},
            timeout=timeout,
            grace=grace,
            tag=tag,
            input_path=input_path,
            cap=cap,
            sandbox=sandbox,
        ),
        stop=stop,
        on_start=on_start,
    )
