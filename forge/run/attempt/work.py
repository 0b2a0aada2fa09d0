"""The work step of an attempt: the agent (or a shell task's command) in the task's
slot, within the attempt's time limit, and what its output says: usage, an
infrastructure failure, a context overflow, or the agent's own failure."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base import logs, proc
from forge.plan.model import Task
from forge.run.state.run_state import (
    Attempt,
    Status,
    TaskState,
    counted,
)

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.agents.spec import AgentSpec


from forge.run.attempt.confinement import agent_state_dir
from forge.run.attempt.context import Outcome, RunContext, group, last_line


def timeout_of(ctx: RunContext, task: Task, spec: AgentSpec | None) -> float:
    """The attempt's time limit: the agent or command and then the check share it."""
    agent_timeout = None
    if spec is not None and task.timeout is None:
        from forge.agents import spec as agents

        agent_timeout = agents.resolve(spec, ctx.agent_defs)[0].timeout
    return ctx.plan.timeout_of(task, agent_timeout)


def run_work(
    ctx: RunContext,
    task: Task,
    ts: TaskState,
    attempt: Attempt,
    attempt_dir: Path,
    path: Path,
    *,
    spec: AgentSpec | None,
    timeout: float,
    env: dict[str, str],
) -> Outcome | None:
    """Run the agent or the shell command for at most `timeout` seconds. None when it
    succeeded."""
    log = attempt_dir / "agent.log"
    attempt.log = str(log)
    attempt.feedback_source = "agent"
    if spec is None:
        assert task.run is not None
        res = group(ctx, task.run, cwd=path, log=log, attempt=attempt, timeout=timeout, env=env)
        defn = None
    else:
        started = _run_agent(
            ctx, task, ts, attempt, attempt_dir, path, log, spec=spec, timeout=timeout, env=env
        )
        if isinstance(started, Outcome):
            return started
        defn, res = started
    output = _read_agent_output(defn, attempt, path, log) if defn is not None else ""
    if res.stopped:
        return Outcome(Status.INTERRUPTED, "stopped by the user")
    if defn is not None and attempt.model_mismatch:
        ts.warnings.append(f"attempt {attempt.number}: model mismatch: {attempt.model_mismatch}")
        if ctx.plan.strict_model:  # its work is not what was paid for: INFRA, not judged
            return Outcome(
                Status.INFRA,
                f"model: model mismatch: {attempt.model_mismatch} (strict_model)",
                infra_kind="model",
                infra_agent=defn.name,
            )
    if defn is not None:
        infra = _infra(defn, res, output, timeout, log)
        if infra is not None:
            return infra
    if res.timed_out:
        what = "command" if spec is None else "agent"
        return Outcome(Status.TIMEOUT, f"{what} timed out after {timeout:g}s")
    if res.returncode != 0:
        if defn is not None:
            from forge.agents import spec as agents

            if agents.is_context_overflow(output):
                return Outcome(
                    Status.FAILED,
                    "the prompt overflowed the agent's context window: split the task",
                )
            said = agents.failure_reason(output) or last_line(log)
            return Outcome(Status.FAILED, f"agent exited {res.returncode}: {said}")
        return Outcome(Status.FAILED, f"command exited {res.returncode}: {last_line(log)}")
    return None


def _run_agent(
    ctx: RunContext,
    task: Task,
    ts: TaskState,
    attempt: Attempt,
    attempt_dir: Path,
    path: Path,
    log: Path,
    *,
    spec: AgentSpec,
    timeout: float,
    env: dict[str, str],
) -> tuple[AgentDef, proc.GroupResult] | Outcome:
    """Write the prompt (and the feedback of a retry) and run the agent's command,
    watching its log for an outage. Returns (its definition, the result), or the
    INFRA outcome of a missing binary."""
    from forge.agents import spec as agents
    from forge.run.attempt import feedback

    defn, spec = agents.resolve(spec, ctx.agent_defs)
    missing = agents.check_binary(defn)
    if missing:
        return Outcome(
            Status.INFRA,
            f"binary-missing: {missing}",
            infra_kind="binary-missing",
            infra_agent=defn.name,
        )
    prompt_file = attempt_dir / "prompt.md"
    fb = feedback.for_retry(ctx.repo, ts) if len(ts.attempts) > 1 else None
    feedback_file = None
    if fb is not None:
        feedback_file = attempt_dir / "feedback.md"
        feedback_file.write_text(feedback.render(fb))
    told = counted(ts.attempts[:-1]) + 1  # INFRA tries are not attempts
    feedback.write_prompt(defn, prompt_file, plan=ctx.plan.name, task=task, attempt=told, fb=fb)
    argv, stdin = agents.render_command(
        defn, spec, prompt_file=prompt_file, task=task.id, worktree=path
    )
    agent_env = agents.agent_env(
        defn,
        spec,
        task=task.id,
        attempt=told,
        prompt_file=prompt_file,
        feedback_file=feedback_file,
        state_dir=agent_state_dir(ctx.repo, ctx.plan.name),
        worktree=path,
    )
    from forge.run.attempt.watch import infra_watch

    with infra_watch(log, defn, ctx.stop) as watch:
        res = group(
            ctx,
            argv,
            cwd=path,
            log=log,
            attempt=attempt,
            timeout=timeout,
            env={**env, **agent_env},
            input_path=stdin,
            stop=watch.event,
        )
    if res.stopped and watch.hit is not None and not ctx.stop.is_set():
        # Stopped on its own outage message: read as a run that ended there.
        res = dataclasses.replace(res, stopped=False, returncode=1)
    return defn, res


def _read_agent_output(defn: AgentDef, attempt: Attempt, path: Path, log: Path) -> str:
    """The end of the agent's log, with its usage recorded in the attempt."""
    from forge.agents import spec as agents

    # The end of the output: usage and provider errors are reported last, and a log
    # may be as large as its cap.
    output = logs.tail(log, logs.ANALYSIS_BYTES)
    # Before any return: an INFRA or stopped attempt's worktree is salvaged
    # later, and a CLI's cache (aider's tags) is never the task's work.
    drop_ignored(path, defn.ignore_paths)
    from forge.agents import models

    attempt.models = models.reported_models(defn, output) or None
    attempt.model_mismatch = models.mismatch(attempt.model, attempt.models or [])
    usage = agents.parse_usage(defn, output)
    if usage is not None:
        attempt.cost_usd = usage.cost_usd
        attempt.input_tokens = usage.input_tokens
        attempt.output_tokens = usage.output_tokens
    return output


def _infra(
    defn: AgentDef, res: proc.GroupResult, output: str, timeout: float, log: Path
) -> Outcome | None:
    """An infrastructure failure the agent's log tells of, as an outcome."""
    from forge.agents import spec as agents

    # Read after a timeout too: a CLI that waits out an outage (reconnecting,
    # honouring a long retry delay) looks like a slow task.
    rc = None if res.timed_out else res.returncode
    try:
        said_at: float | None = log.stat().st_mtime  # when the CLI last wrote
    except OSError:
        said_at = None
    infra = agents.classify_failure(defn, returncode=rc, output=output, said_at=said_at)
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
