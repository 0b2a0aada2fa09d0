"""The work step of an attempt: the agent (or a shell task's command) in the task's
slot, within the attempt's time limit, and what its output says: usage, an
infrastructure failure, a context overflow, or the agent's own failure. The same
step in a local slot and on a cluster worker (forge.run.attempt.steps)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base import logs, procgroup
from forge.run.attempt import messages
from forge.run.attempt.context import Command, Outcome, Place, last_line
from forge.run.state import events as ev
from forge.run.state import records
from forge.run.state.run_state import Attempt, Status

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.run.attempt.order import WorkOrder


def run_work(
    order: WorkOrder, place: Place, attempt: Attempt, env: Mapping[str, str]
) -> Outcome | None:
    """Run the agent or the shell command for at most the order's timeout. None when
    it succeeded."""
    log = place.logs / "agent.log"
    place.record(ev.FeedbackNoted(order.task, attempt.number, str(log), records.AGENT))
    timeout = order.timeout
    if order.agent is None:
        assert order.run is not None
        res = place.group(Command(order.run, log, timeout, env))
        defn = None
    else:
        started = _run_agent(order, place, log, env)
        if isinstance(started, Outcome):
            return started
        defn, res = started
    output = _read_agent_output(defn, order, place, attempt, log) if defn is not None else ""
    if res.stopped:
        return Outcome(Status.INTERRUPTED, messages.STOPPED)
    if defn is not None and attempt.model_mismatch:
        place.warn(f"attempt {order.number}: model mismatch: {attempt.model_mismatch}")
        if order.strict_model:  # its work is not what was paid for: INFRA, not judged
            return Outcome(
                Status.INFRA,
                f"model: model mismatch: {attempt.model_mismatch} (strict_model)",
                infra_kind="model",
                infra_agent=defn.name,
            )
    if defn is not None:
        infra = _infra(defn, res, output, timeout)
        if infra is not None:
            return infra
    what = "command" if defn is None else "agent"
    if res.timed_out:
        return Outcome(Status.TIMEOUT, messages.timed_out(what, timeout))
    if res.returncode is not None and res.returncode != 0:
        said = last_line(log)
        if defn is not None:
            from forge.agents import spec as agents

            if agents.is_context_overflow(output):
                return Outcome(Status.FAILED, messages.CONTEXT_OVERFLOW)
            said = agents.failure_reason(output) or said
        return Outcome(Status.FAILED, messages.exited(what, res.returncode, said))
    return None


def _run_agent(
    order: WorkOrder, place: Place, log: Path, env: Mapping[str, str]
) -> tuple[AgentDef, procgroup.GroupResult] | Outcome:
    """Write the prompt (and the feedback of a retry) and run the agent's command,
    watching its log for an outage. Returns (its definition, the result), or the
    INFRA outcome of a missing binary."""
    from forge.agents import spec as agents
    from forge.run.attempt.watch import infra_watch

    assert order.agent is not None
    defn, spec = order.agent
    missing = agents.check_binary(defn)
    if missing:
        return Outcome(
            Status.INFRA,
            messages.binary_missing(missing),
            infra_kind="binary-missing",
            infra_agent=defn.name,
        )
    prompt_file = place.logs / "prompt.md"
    prompt_file.write_text(order.prompt_text)
    feedback_file = None
    if order.feedback_text is not None:
        feedback_file = place.logs / "feedback.md"
        feedback_file.write_text(order.feedback_text)
    argv, stdin = agents.render_command(
        defn, spec, prompt_file=prompt_file, task=order.task, worktree=place.slot
    )
    call = agents.AgentCall(
        order.task,
        order.told,
        prompt_file,
        place.state_dir,
        feedback_file=feedback_file,
        worktree=place.slot,
    )
    agent_env = agents.agent_env(defn, spec, call)
    with infra_watch(log, defn, place.stop) as watch:
        command = Command(argv, log, order.timeout, {**env, **agent_env}, stdin, watch.event)
        res = place.group(command)
    if res.stopped and watch.hit is not None and not place.stop.is_set():
        # Stopped on its own outage message: read as a run that ended there.
        res = dataclasses.replace(res, stopped=False, returncode=1)
    return defn, res


def _read_agent_output(
    defn: AgentDef, order: WorkOrder, place: Place, attempt: Attempt, log: Path
) -> str:
    """The end of the agent's log, with its usage recorded in the attempt."""
    from forge.agents import spec as agents

    # The end of the output: usage and provider errors are reported last, and a log
    # may be as large as its cap.
    output = logs.tail(log, logs.ANALYSIS_BYTES)
    # Before any return: an INFRA or stopped attempt's worktree is salvaged
    # later, and a CLI's cache (aider's tags) is never the task's work.
    drop_ignored(place.slot, defn.ignore_paths)
    from forge.agents import models

    reported = models.reported_models(defn, output) or None
    mismatch = models.mismatch(attempt.model, reported or [])
    number = attempt.number
    shown = None if reported is None else tuple(reported)
    said: list[ev.Event] = [ev.ModelsReported(order.task, number, shown, mismatch)]
    usage = agents.parse_usage(defn, output)
    if usage is not None:
        said.append(
            ev.AttemptUsage(
                order.task, number, usage.cost_usd, usage.input_tokens, usage.output_tokens
            )
        )
    for event in said:
        place.record(event)
    return output


def _infra(
    defn: AgentDef, res: procgroup.GroupResult, output: str, timeout: float
) -> Outcome | None:
    """An infrastructure failure the agent's log tells of, as an outcome."""
    from forge.agents import spec as agents

    # Read after a timeout too: a CLI that waits out an outage (reconnecting,
    # honouring a long retry delay) looks like a slow task.
    rc = None if res.timed_out else res.returncode
    # When the CLI itself last wrote: the log's mtime would be forge's own lines
    # at the timeout, and a printed retry delay would count from there.
    infra = agents.classify_failure(defn, returncode=rc, output=output, said_at=res.last_output)
    if infra is not None:
        after = f" (timed out after {timeout:g}s)" if res.timed_out else ""
        return Outcome(
            Status.INFRA,
            f"{infra.kind}: {infra.message}{after}",
            infra_retry_after=infra.retry_after,
            infra_kind=infra.kind,
            infra_agent=defn.name,
        )
    return None


def drop_ignored(path: Path, patterns: tuple[str, ...]) -> None:
    """Remove what the agent's CLI leaves in the worktree that is never the task's
    work (aider's caches): it must neither count as a change nor break the scope."""
    import shutil

    for pattern in patterns:
        for hit in path.glob(pattern):
            if hit.name == ".git":
                continue
            if hit.is_dir() and not hit.is_symlink():
                shutil.rmtree(hit, ignore_errors=True)
            else:
                hit.unlink(missing_ok=True)
