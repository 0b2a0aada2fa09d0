"""The reviewer gate: after a task's check passes, a reviewer agent judges the work.

The reviewer runs in the task's slot with a prompt file of its own (the task's
prompt, its declared files, the diff) and gives its verdict as JSON in the file
named by FORGE_REVIEW_FILE (`{review_file}` in a command): `{"verdict":
"approve"}` or `{"verdict": "reject", "findings": "..."}`. Without a file, exit
0 approves and any other exit rejects, the output's tail as the findings. A
reviewer that cannot run (missing, rate-limited, timed out) judges nothing:
the attempt is INFRA and the reviewer's agent backs off as a task's would.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.agents.output import cli_message
from forge.base import proc
from forge.plan.model import Task
from forge.run.attempt.confinement import agent_state_dir, ceiling_env, sandbox_for
from forge.run.state.run_state import Attempt, TaskState

DIFF_LIMIT = 200_000  # characters of diff in the prompt; a bigger one is cut, and says so
FINDINGS_LINES = 30


@dataclass(frozen=True)
class Verdict:
    verdict: str  # approve, reject, infra, stopped
    findings: str = ""
    agent: str = ""  # the reviewer's agent name
    infra_kind: str | None = None
    retry_after: float | None = None


def judge(
    ctx: Any,
    task: Task,
    ts: TaskState,
    attempt: Attempt,
    attempt_dir: Path,
    worktree: Path,
    head: str,
    *,
    on_start: Callable[[int], None],
) -> Verdict | None:
    """Run the task's reviewer on `head`; None when the task has none."""
    text = ctx.plan.review_of(task)
    if text is None:
        return None
    from forge.agents import spec as agents

    defn, spec = agents.resolve(text, ctx.agent_defs)
    log = attempt_dir / "review.log"
    verdict_file = attempt_dir / "review.json"
    # Replaced whole, never changed in place: another thread may be saving the state.
    record: dict[str, Any] = {"agent": str(spec), "verdict": "running", "log": str(log)}
    attempt.review = record
    missing = agents.check_binary(defn)
    if missing:
        return _done(
            attempt,
            record,
            Verdict("infra", f"binary-missing: {missing}", defn.name, "binary-missing"),
        )
    assert ts.base is not None
    prompt_file = attempt_dir / "review-prompt.md"
    agents.write_review_file(
        prompt_file,
        plan=ctx.plan.name,
        task_id=task.id,
        title=task.title,
        prompt=task.prompt or "",
        files=task.files,
        diff=_diff(ctx.repo, ts.base, head),
        review_file=verdict_file,
    )
    verdict_file.unlink(missing_ok=True)
    argv, stdin = agents.render_command(
        defn,
        spec,
        prompt_file=prompt_file,
        task=task.id,
        worktree=worktree,
        review_file=verdict_file,
    )
    env = agents.agent_env(
        defn,
        spec,
        task=task.id,
        attempt=attempt.number,
        prompt_file=prompt_file,
        feedback_file=None,
        state_dir=agent_state_dir(ctx.repo, ctx.plan.name),
        worktree=worktree,
        review_file=verdict_file,
    )
    timeout = ctx.plan.timeout_of(task, defn.timeout)
    stop: threading.Event = ctx.stop
    res = proc.run_group(
        proc.GroupSpec(
            argv,
            cwd=worktree,
            log_path=log,
            env={**ctx.settings.child_env(), **ceiling_env(worktree), **env},
            timeout=timeout,
            grace=ctx.settings.grace,
            tag=attempt.tag,
            input_path=stdin,
            sandbox=sandbox_for(
                ctx.repo, ctx.logs, worktree, on=ctx.sandbox, writable=(verdict_file.parent,)
            ),
        ),
        stop=stop,
        on_start=on_start,
    )
    output = log.read_text(errors="replace") if log.exists() else ""
    usage = agents.parse_usage(defn, output)
    if usage is not None:
        # The review's spend is the task's.
        record = {
            **record,
            "cost_usd": usage.cost_usd,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
        }
        attempt.cost_usd = _add(attempt.cost_usd, usage.cost_usd)
        attempt.input_tokens = _add(attempt.input_tokens, usage.input_tokens)
        attempt.output_tokens = _add(attempt.output_tokens, usage.output_tokens)
    if res.stopped:
        return _done(attempt, record, Verdict("stopped", "stopped by the user", defn.name))
    written = _read_verdict(verdict_file)
    if written is not None:
        return _done(attempt, record, Verdict(written[0], written[1], defn.name))
    rc = None if res.timed_out else res.returncode
    infra = agents.classify_failure(defn, returncode=rc, output=output)
    if infra is not None:
        message = f"{infra.kind}: {infra.message}"
        return _done(
            attempt, record, Verdict("infra", message, defn.name, infra.kind, infra.retry_after)
        )
    if res.timed_out:
        return _done(
            attempt, record, Verdict("infra", f"timed out after {timeout:g}s", defn.name, "timeout")
        )
    if res.returncode == 0:
        return _done(attempt, record, Verdict("approve", "", defn.name))
    # A JSON CLI's own message says it; else the output's tail.
    findings = cli_message(output) or proc.tail(output, FINDINGS_LINES)
    return _done(
        attempt,
        record,
        Verdict("reject", findings or f"reviewer exited {res.returncode}", defn.name),
    )


def _done(attempt: Attempt, record: dict[str, Any], verdict: Verdict) -> Verdict:
    done = {**record, "verdict": verdict.verdict}
    if verdict.findings:
        done["findings"] = verdict.findings
    attempt.review = done
    return verdict


def _add(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _diff(repo: Any, base: str, head: str) -> str:
    diff: str = repo.git("diff", "--no-color", "--no-ext-diff", base, head)
    if len(diff) > DIFF_LIMIT:
        cut = len(diff) - DIFF_LIMIT
        diff = diff[:DIFF_LIMIT] + f"\n... ({cut} more characters of diff cut)\n"
    return diff


def _read_verdict(path: Path) -> tuple[str, str] | None:
    """(approve|reject, findings) from the verdict file; None when there is no
    usable one (then the exit code decides)."""
    try:
        data = json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    verdict = str(data.get("verdict", "")).strip().lower()
    if verdict not in ("approve", "reject"):
        return None
    findings = data.get("findings", "")
    if not isinstance(findings, str):
        findings = json.dumps(findings)
    return verdict, findings.strip()
