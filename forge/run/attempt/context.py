"""One attempt's scope (with the run context, forge.run.context), how an attempt ends (its Outcome), where its steps run (a Place: a local slot or a cluster
worker's), and the one way an attempt runs a command here: in a process group of
its own, in its worktree's environment, under the sandbox when the plan asks for it."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from forge.base import logs, procgroup
from forge.base.sandbox import SETUP_CACHE
from forge.frozen import frozen
from forge.plan.model import Task
from forge.run.attempt.confinement import run_contained, sandbox_for
from forge.run.attempt.reason import reason_line
from forge.run.context import RunContext
from forge.run.state import events as ev
from forge.run.state.run_state import Attempt, Stall, Status, TaskState
from forge.run.state.store import record_attempt

if TYPE_CHECKING:
    from forge.agents.spec import AgentSpec


class Remote(Protocol):
    """Runs an attempt elsewhere (a cluster worker): the same steps as a local slot
    (forge.run.attempt.steps) run there; returns an Outcome, or the commit to merge
    (on the task branch)."""

    def attempt(self, scope: AttemptScope) -> Outcome | str: ...


@frozen
class Command:
    """One command of an attempt's steps (setup, agent, check), for its Place to run."""

    argv: Sequence[str] | str
    log: Path
    timeout: float | None
    env: Mapping[str, str]
    input_path: Path | None = None
    stop: threading.Event | None = None  # None: the run's
    writable: tuple[Path, ...] = ()  # what else the sandbox lets it write
    network: bool = True  # False: no network in the sandbox (a check without `network`)
    cache: bool = False  # setup's: its caches go to a folder of forge's in the sandbox


class Place(Protocol):
    """Where an attempt's steps run: what differs between a local slot and a
    cluster worker's."""

    slot: Path  # the worktree the work happens in
    logs: Path  # the attempt's log folder
    state_dir: Path  # the agents' own state (agent_env)
    stop: threading.Event  # set when the run stops
    sandboxed: bool  # its commands run in forge's sandbox

    def group(self, command: Command) -> procgroup.GroupResult:
        """Run a command in the slot (forge.run.attempt.confinement.run_contained)."""
        ...

    def phase(self, name: str, *, save: bool = False) -> AbstractContextManager[object]:
        """A phase of the attempt (forge.run.attempt.phases), where it is recorded."""
        ...

    def set_up(self) -> None:
        """The slot's setup is done (or was not needed)."""

    def commit(self, message: str) -> str:
        """Commit what the slot holds onto the task branch; the head after
        (unchanged when there was nothing to commit)."""
        ...

    def shares_history(self, base: str, head: str) -> bool:
        """Whether `head` has a common ancestor with `base` (a merge can be built)."""
        ...

    def changed(self, base: str, head: str) -> list[str]:
        """The paths `head` changes against `base`."""
        ...

    def tree(self, commit: str) -> str:
        """The tree id of `commit`: with the base, it names the change."""
        ...

    def restore(self) -> None:
        """Put the slot back to its committed work (a check may write into it)."""

    def warn(self, message: str) -> None:
        """A warning of the task's (an out-of-scope change the plan only warns of)."""

    def saved(self) -> None:
        """The attempt's record changed: save it where the run keeps it."""

    def record(self, event: ev.Event) -> None:
        """Something happened to the attempt (its log, its commit, its spend...):
        applied to its record where the run keeps it."""


@frozen
class Asked:
    """How an attempt is asked for: `fresh`, from the integration head instead of
    the last attempt's work; `fallback`, why its agent is a fallback, when it is
    one; `person`, a person asked for it (`forge retry TASK`)."""

    fresh: bool = False
    fallback: str | None = None
    person: bool = False


@dataclass
class AttemptScope:
    """One attempt of one task in this run: what its steps share."""

    ctx: RunContext
    task: Task
    ts: TaskState
    attempt: Attempt
    dir: Path  # the attempt's logs
    spec: AgentSpec | None  # the agent of a prompt task; None for a `run` task
    fresh: bool = False  # start from the integration head, not the last attempt's work
    person: bool = False  # `forge retry TASK`: a person asked for this attempt
    remote: Remote | None = None  # where it runs when not here: a cluster (forge.cluster)


@frozen
class Outcome:
    status: Status
    reason: str
    infra_retry_after: float | None = None
    infra_kind: str | None = None
    infra_agent: str | None = None  # the agent that could not run (the task's, or its reviewer)
    stall: Stall | None = None  # FAILED: the work went nowhere


def group(
    ctx: RunContext,
    command: Command,
    *,
    cwd: Path,
    attempt: Attempt,
    task: str | None = None,
) -> procgroup.GroupResult:
    """Run a command of the attempt (setup, agent, check, reviewer) in `cwd`; the
    sandbox, when the run has one, lets it write the slot and the command's
    `writable`, and reach the network when the command's `network`."""

    def started(pgid: int) -> None:
        # Kept in memory and saved with the next change: crash recovery finds the
        # processes by their tag, which was saved before the spawn.
        if task is None:  # an attempt of no task's record (a judge's)
            record_attempt(attempt, ev.ProcessGroup("", attempt.number, pgid))
        else:
            ctx.store.record(ctx.state, ev.ProcessGroup(task, attempt.number, pgid), later=True)

    c = command
    sandbox = None
    if ctx.sandbox:
        sandbox = replace(
            sandbox_for(ctx.repo, ctx.logs, cwd, writable=c.writable, network=c.network),
            sockets=ctx.plan.sockets,
            host_ports=ctx.plan.host_ports,
        )
        if c.cache:  # setup's: the usual cache variables point into a folder of forge's
            sandbox = replace(sandbox, cache=ctx.repo.state.root / SETUP_CACHE)
    spec = procgroup.GroupSpec(
        c.argv,
        cwd=cwd,
        log_path=c.log,
        env={**ctx.settings.child_env(), **c.env},
        timeout=c.timeout,
        grace=ctx.settings.grace,
        tag=attempt.tag,
        input_path=c.input_path,
        cap=ctx.plan.log_cap,
        sandbox=sandbox,
    )
    return run_contained(
        ctx.repo, spec, stop=ctx.stop if c.stop is None else c.stop, on_start=started
    )


def last_line(log: Path) -> str:
    said = reason_line(logs.tail(log))
    if said != reason_line("") or not log.is_file():
        return said
    # The tail began inside one long line and dropped it as cut: a command that printed
    # one endless line (past the log cap) read "(no output)". Its end says what it did.
    return long_line(log)


def long_line(log: Path, *, shown: int = 120) -> str:
    """The end of the log's last line of output, said as the end of a long line."""
    with log.open("rb") as fh:
        fh.seek(max(0, fh.seek(0, 2) - logs.TAIL_BYTES))
        text = fh.read().decode("utf-8", errors="replace")
    lines = text.splitlines()
    capped = any(line.startswith("forge: log cap of ") for line in lines)
    output = [line for line in lines if line.strip() and not line.startswith("forge: ")]
    if not output:
        return reason_line("")
    cut = ", cut by the log cap" if capped else ""
    size = logs.TAIL_BYTES // 1024
    return f"…{output[-1][-shown:].strip()} (its output ends in one line of over {size} KiB{cut})"
