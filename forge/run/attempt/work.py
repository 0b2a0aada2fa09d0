"""The work step of an attempt: the agent (or a shell task's command) in the task's
slot, within the attempt's time limit, and what its output says: usage, an
infrastructure failure, a context overflow, or the agent's own failure. The same
step in a local slot and on a cluster worker (forge.run.attempt.steps)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base import procgroup
from forge.run.attempt import messages
from forge.run.attempt.agent import Answer, Ask, ask_agent
from forge.run.attempt.context import Command, Outcome, Place, last_line
from forge.run.state import events as ev
from forge.run.state import records
from forge.run.state.run_state import Attempt, Status

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.agents.output import InfraFailure
    from forge.run.attempt.order import WorkOrder


def run_work(
    order: WorkOrder, place: Place, attempt: Attempt, env: Mapping[str, str]
) -> Outcome | None:
    """Run the agent or the shell command for at most the order's timeout. None when
    it succeeded."""
    log = place.logs / "agent.log"
    place.record(ev.FeedbackNoted(order.task, attempt.number, str(log), records.AGENT))
    if order.agent is None:
        assert order.run is not None
        res = place.group(Command(order.run, log, order.timeout, env))
        if res.stopped:
            return Outcome(Status.INTERRUPTED, messages.STOPPED)
        return _ended("command", res, log, order.timeout)
    answer = _run_agent(order, place, log, env)
    defn = order.agent[0]
    if answer.exit is None:  # it could not run: its binary is missing
        assert answer.infra is not None
        return _infra(answer.infra, defn, messages.binary_missing(answer.infra.message))
    _read_agent_output(defn, answer, order, place, attempt)
    if answer.stopped:
        return Outcome(Status.INTERRUPTED, messages.STOPPED)
    if attempt.model_mismatch:
        place.warn(f"attempt {order.number}: model mismatch: {attempt.model_mismatch}")
        if order.strict_model:  # its work is not what was paid for: INFRA, not judged
            return Outcome(
                Status.INFRA,
                messages.strict_model(attempt.model_mismatch),
                infra_kind="model",
                infra_agent=defn.name,
            )
    if answer.infra is not None:
        infra = answer.infra
        after = f" (timed out after {order.timeout:g}s)" if answer.timed_out else ""
        return _infra(infra, defn, messages.infra(infra.kind, infra.message) + after)
    if answer.exit.returncode not in (None, 0) and not answer.timed_out:
        from forge.agents import spec as agents

        if agents.is_context_overflow(answer.output):
            return Outcome(Status.FAILED, messages.CONTEXT_OVERFLOW)
        said = agents.failure_reason(answer.output) or last_line(log)
        return Outcome(Status.FAILED, messages.exited("agent", answer.exit.returncode, said))
    return _ended("agent", answer.exit, log, order.timeout)


def _ended(what: str, res: procgroup.GroupResult, log: Path, timeout: float) -> Outcome | None:
    """How a run that was not stopped ended: in time with exit 0 (None), timed out,
    or exited otherwise (its log's last line says why)."""
    if res.timed_out:
        return Outcome(Status.TIMEOUT, messages.timed_out(what, timeout))
    if res.returncode is not None and res.returncode != 0:
        return Outcome(Status.FAILED, messages.exited(what, res.returncode, last_line(log)))
    return None


def _run_agent(order: WorkOrder, place: Place, log: Path, env: Mapping[str, str]) -> Answer:
    """Write the prompt (and the feedback of a retry) and run the agent."""
    assert order.agent is not None
    prompt_file = place.logs / "prompt.md"
    prompt_file.write_text(order.prompt_text)
    feedback_file = None
    if order.feedback_text is not None:
        feedback_file = place.logs / "feedback.md"
        feedback_file.write_text(order.feedback_text)
    ask = Ask(
        order.agent,
        order.task,
        order.told,
        prompt_file,
        log,
        order.timeout,
        env,
        feedback_file=feedback_file,
    )
    return ask_agent(ask, place)


def _read_agent_output(
    defn: AgentDef, answer: Answer, order: WorkOrder, place: Place, attempt: Attempt
) -> None:
    """Record the models the agent's output names and its usage in the attempt."""
    # Before any return: an INFRA or stopped attempt's worktree is salvaged
    # later, and a CLI's cache (aider's tags) is never the task's work.
    drop_ignored(place.slot, defn.ignore_paths)
    from forge.agents import models

    reported = models.reported_models(defn, answer.output) or None
    mismatch = models.mismatch(attempt.model, reported or [])
    number = attempt.number
    shown = None if reported is None else tuple(reported)
    said: list[ev.Event] = [ev.ModelsReported(order.task, number, shown, mismatch)]
    usage = answer.usage
    if usage is not None:
        said.append(
            ev.AttemptUsage(
                order.task, number, usage.cost_usd, usage.input_tokens, usage.output_tokens
            )
        )
    for event in said:
        place.record(event)


def _infra(infra: InfraFailure, defn: AgentDef, reason: str) -> Outcome:
    """An infrastructure failure the agent's run tells of, as an outcome."""
    return Outcome(
        Status.INFRA,
        reason,
        infra_retry_after=infra.retry_after,
        infra_kind=infra.kind,
        infra_agent=defn.name,
    )


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
