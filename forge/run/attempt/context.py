"""What every attempt of a run shares (the run context), how an attempt ends (its
Outcome), and the one way an attempt runs a command: in a process group of its own,
in its worktree's environment, under the sandbox when the plan asks for it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from forge.base import logs, proc
from forge.base.liveness import Owner
from forge.base.settings import Settings
from forge.git.repo import Repository
from forge.plan.model import Plan, Task
from forge.run.attempt.confinement import ceiling_env, sandbox_for
from forge.run.attempt.reason import reason_line
from forge.run.state.run_state import (
    Attempt,
    RunState,
    Stall,
    StateStore,
    Status,
    TaskState,
)
from forge.run.state.slots import SlotPool

if TYPE_CHECKING:
    from forge.agents.spec import AgentSpec


class Remote(Protocol):
    """Runs an attempt elsewhere (a cluster worker): setup, work, commit, scope and
    check there; returns an Outcome, or the commit to merge (on the task branch)."""

    def attempt(
        self,
        ctx: RunContext,
        task: Task,
        ts: TaskState,
        attempt: Attempt,
        attempt_dir: Path,
        *,
        spec: AgentSpec | None,
        fresh: bool,
    ) -> Outcome | str: ...


@dataclass
class RunContext:
    """What every attempt of one run shares."""

    repo: Repository
    plan: Plan
    state: RunState
    store: StateStore
    slots: SlotPool
    logs: Path
    stop: threading.Event
    agent_defs: Mapping[str, Mapping[str, Any]]
    owner: Owner  # this run's process, recorded as each task's runner
    merge_lock: threading.Lock = field(default_factory=threading.Lock)
    gated: bool = False  # finished work is QUEUED for the gate instead of merged
    remote: Remote | None = None  # attempts run on a cluster (forge.cluster) when set
    on_change: Callable[[str], None] = lambda _task: None
    sandbox: bool = False  # every command under bubblewrap, only its slot writable
    router: Any = None  # `agent = "auto"`: the run's routing (forge/run/routing.py)
    capacity: Any = None  # the dispatcher's per-agent bookkeeping (forge/run/capacity.py)

    @property
    def settings(self) -> Settings:
        return self.repo.settings

    def save(self, task: str | None = None) -> None:
        self.store.save(self.state, task=task)
        if task is not None:
            self.on_change(task)


@dataclass(frozen=True)
class Outcome:
    status: Status
    reason: str
    infra_retry_after: float | None = None
    infra_kind: str | None = None
    infra_agent: str | None = None  # the agent that could not run (the task's, or its reviewer)
    stall: Stall | None = None  # FAILED: the work went nowhere


def group(
    ctx: RunContext,
    argv: list[str] | str,
    *,
    cwd: Path,
    log: Path,
    attempt: Attempt,
    timeout: float | None,
    env: Mapping[str, str] | None = None,
    input_path: Path | None = None,
    stop: threading.Event | None = None,
) -> proc.GroupResult:
    def started(pgid: int) -> None:
        # Kept in memory and saved with the next change: crash recovery finds the
        # processes by their tag, which was saved before the spawn.
        attempt.pgid = pgid

    box = sandbox_for(ctx.repo, ctx.logs, cwd, on=ctx.sandbox)
    return proc.run_group(
        proc.GroupSpec(
            argv,
            cwd=cwd,
            log_path=log,
            env={**ctx.settings.child_env(), **ceiling_env(cwd), **(env or {})},
            timeout=timeout,
            grace=ctx.settings.grace,
            tag=attempt.tag,
            input_path=input_path,
            cap=ctx.plan.log_cap,
            sandbox=box,
        ),
        stop=ctx.stop if stop is None else stop,
        on_start=started,
    )


def last_line(log: Path) -> str:
    return reason_line(logs.tail(log))
