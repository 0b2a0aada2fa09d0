"""Running an agent and reading its answer: the one way forge runs an agent on a
prompt file, for the task's work (forge.run.attempt.work), its reviewer
(forge.run.attempt.review) and the best-of-N judge (forge.run.gate.selection).

The agent runs in the folder of a Runner (a local slot, a cluster worker's, the
judge's folder) through the runner's one way of running a command, its own state
(its CLI home) in the runner's `state_dir`: on this machine always
`agent_state_dir` (forge.run.state.folders), which the sandbox lets it write and
`forge clean` removes. Its answer is typed: how it ended, the end of its output,
what it spent, and the infrastructure failure its output tells of.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from forge.base import logs, procgroup
from forge.frozen import frozen
from forge.run.attempt.context import Command, group
from forge.run.state.folders import agent_state_dir
from forge.run.state.run_state import Attempt

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.agents.output import InfraFailure
    from forge.agents.spec import AgentSpec
    from forge.agents.usage import Usage
    from forge.run.context import RunContext

MISSING = "binary-missing"  # the infrastructure failure of an agent whose binary is not there


class Runner(Protocol):
    """Where an agent runs: what a Place (forge.run.attempt.context) has for it."""

    slot: Path  # the folder it runs in (its `{worktree}`)
    state_dir: Path  # the agents' own state (agent_env)
    stop: threading.Event  # set when the run stops
    sandboxed: bool  # its commands run in forge's sandbox

    def group(self, command: Command) -> procgroup.GroupResult: ...


@frozen
class Ask:
    """One run of an agent: its prompt file, its log, its time limit, and what else
    it is handed."""

    agent: tuple[AgentDef, AgentSpec]
    task: str
    attempt: int
    prompt_file: Path
    log: Path
    timeout: float | None
    env: Mapping[str, str] = field(default_factory=dict)  # added to the agent's own
    feedback_file: Path | None = None  # a retry's feedback
    review_file: Path | None = None  # where a reviewer writes its verdict (it may write there)


@frozen
class Answer:
    """What an agent's run says. `exit` is None when it could not run at all (its
    binary is missing: `infra` says so)."""

    agent: str  # the agent's name
    exit: procgroup.GroupResult | None
    output: str  # the end of its log: usage and provider errors are reported last
    usage: Usage | None
    infra: InfraFailure | None  # an infrastructure failure its output tells of

    @property
    def stopped(self) -> bool:
        return self.exit is not None and self.exit.stopped

    @property
    def timed_out(self) -> bool:
        return self.exit is not None and self.exit.timed_out

    @property
    def returncode(self) -> int | None:
        return None if self.exit is None else self.exit.returncode


def ask_agent(ask: Ask, runner: Runner) -> Answer:
    """Run the agent of `ask` in `runner`'s folder, watching its log for its own
    outage messages, and read its answer."""
    from forge.agents import spec as agents
    from forge.run.attempt.watch import infra_watch

    defn, spec = ask.agent
    if runner.sandboxed:
        nested = defn.root_sandbox_command if os.geteuid() == 0 else ()
        nested = nested or defn.sandbox_command
        if nested:
            defn = dataclasses.replace(defn, command=nested)
    missing = agents.check_binary(defn)
    if missing:
        from forge.agents.output import InfraFailure

        return Answer(defn.name, None, "", None, InfraFailure(MISSING, missing, None))
    review_file = ask.review_file
    argv, stdin = agents.render_command(
        defn,
        spec,
        prompt_file=ask.prompt_file,
        task=ask.task,
        worktree=runner.slot,
        review_file=review_file,
    )
    call = agents.AgentCall(
        ask.task,
        ask.attempt,
        ask.prompt_file,
        runner.state_dir,
        feedback_file=ask.feedback_file,
        worktree=runner.slot,
        review_file=review_file,
    )
    env = {**ask.env, **agents.agent_env(defn, spec, call)}
    writable = () if review_file is None else (review_file.parent,)
    with infra_watch(ask.log, defn, runner.stop) as watch:
        command = Command(argv, ask.log, ask.timeout, env, stdin, watch.event, writable)
        res = runner.group(command)
    if res.stopped and watch.hit is not None and not runner.stop.is_set():
        # Stopped on its own outage message: read as a run that ended there.
        res = dataclasses.replace(res, stopped=False, returncode=1)
    output = logs.tail(ask.log, logs.ANALYSIS_BYTES)
    # Read after a timeout too: a CLI that waits out an outage (reconnecting,
    # honouring a long retry delay) looks like a slow task. When the CLI itself
    # last wrote: the log's mtime would be forge's own lines at the timeout, and a
    # printed retry delay would count from there.
    rc = None if res.timed_out else res.returncode
    infra = agents.classify_failure(defn, returncode=rc, output=output, said_at=res.last_output)
    return Answer(defn.name, res, output, agents.parse_usage(defn, output), infra)


@dataclass
class Folder:
    """A folder of this machine's, outside any slot, as where an agent runs (the
    best-of-N judge's): its commands run as an attempt's, its agent state where
    every agent's of the plan is."""

    ctx: RunContext
    slot: Path
    attempt: Attempt  # of no task's record: its process group is kept in it
    state_dir: Path = field(init=False)
    stop: threading.Event = field(init=False)
    sandboxed: bool = field(init=False)

    def __post_init__(self) -> None:
        self.state_dir = agent_state_dir(self.ctx.repo, self.ctx.plan.name)
        self.stop = self.ctx.stop
        self.sandboxed = self.ctx.sandbox

    def group(self, command: Command) -> procgroup.GroupResult:
        return group(self.ctx, command, cwd=self.slot, attempt=self.attempt)
