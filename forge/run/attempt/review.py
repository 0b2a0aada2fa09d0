"""The reviewer gate: after a task's check passes, a reviewer agent judges the work.

The reviewer runs in the task's slot (here, or on the cluster worker that ran the
attempt) with a prompt file of its own (the task's
prompt, its declared files, the diff) and gives its verdict as JSON in the file
named by FORGE_REVIEW_FILE (`{review_file}` in a command): `{"verdict":
"approve"}` or `{"verdict": "reject", "findings": "..."}`. Without a file, exit
0 approves and any other exit rejects, the output's tail as the findings. A
reviewer that cannot run (missing, rate-limited, timed out) judges nothing:
the attempt is INFRA and the reviewer's agent backs off as a task's would.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from forge.agents.output import cli_message
from forge.base import proc
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.run.attempt import messages
from forge.run.attempt.agent import Answer, Ask, ask_agent
from forge.run.attempt.context import AttemptScope, Outcome, Place
from forge.run.context import RunContext
from forge.run.state import events as ev
from forge.run.state import records
from forge.run.state.records import Review, ReviewVerdict
from forge.run.state.run_state import Attempt, Status

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.agents.spec import AgentSpec
    from forge.plan.model import Task

DIFF_LIMIT = 200_000  # characters of diff in the prompt; a bigger one is cut, and says so
FINDINGS_LINES = 30
FINDINGS = "review.md"  # a rejection's findings, in the attempt's log folder


@frozen
class Verdict:
    verdict: ReviewVerdict
    findings: str = ""
    agent: str = ""  # the reviewer's agent name
    infra_kind: str | None = None
    retry_after: float | None = None


@frozen
class ReviewOrder:
    """What a task's review needs: made here, carried to a cluster worker in the
    attempt's WorkOrder (plain values only)."""

    agent: tuple[AgentDef, AgentSpec]
    plan: str
    task: str
    title: str
    prompt: str
    files: tuple[str, ...]
    timeout: float


def review_order(ctx: RunContext, task: Task) -> ReviewOrder | None:
    """The review of `task`'s attempts; None when it has no reviewer."""
    text = ctx.plan.review_of(task)
    if text is None:
        return None

    defn, spec = ctx.agents.resolve(text)
    timeout = ctx.plan.timeout_of(task, defn.timeout)
    prompt = task.prompt or ""
    return ReviewOrder(
        (defn, spec), ctx.plan.name, task.id, task.title, prompt, task.files, timeout
    )


def judge(scope: AttemptScope, place: Place, head: str) -> Verdict | None:
    """Run the task's reviewer on `head` in this machine's slot; None when the task
    has none."""
    order = review_order(scope.ctx, scope.task)
    if order is None:
        return None
    assert scope.ts.base is not None
    diff = diff_text(scope.ctx.repo, scope.ts.base, head)
    return run_review(order, place, scope.attempt, diff=diff)


def run_review(order: ReviewOrder, place: Place, attempt: Attempt, *, diff: str) -> Verdict:
    """The reviewer of `order` on the work `place`'s slot has checked out (its change
    against the base: `diff`), its files in `place`'s log folder: here or on a
    cluster worker."""
    from forge.agents import spec as agents

    defn, spec = order.agent
    log = place.logs / "review.log"
    verdict_file = place.logs / "review.json"
    # Replaced whole, never changed in place: another thread may be saving the state.
    record = Review(str(spec), ReviewVerdict.RUNNING, str(log))
    place.record(ev.Reviewed(order.task, attempt.number, record))
    done = functools.partial(_done, place, order.task, attempt)
    prompt_file = place.logs / "review-prompt.md"
    text = agents.TaskText(order.plan, order.task, order.title, order.prompt, order.files)
    agents.write_review_file(prompt_file, text, diff=diff, review_file=verdict_file)
    verdict_file.unlink(missing_ok=True)
    ask = Ask(
        order.agent,
        order.task,
        attempt.number,
        prompt_file,
        log,
        order.timeout,
        review_file=verdict_file,
    )
    answer = ask_agent(ask, place)
    infra = answer.infra
    if answer.exit is None:  # its binary is missing
        assert infra is not None
        return done(
            record,
            Verdict(
                ReviewVerdict.INFRA, messages.binary_missing(infra.message), defn.name, infra.kind
            ),
        )
    usage = answer.usage
    if usage is not None:
        # The review's spend is the task's.
        record = replace(
            record,
            cost_usd=usage.cost_usd,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            spent=True,
        )
        place.record(
            ev.AttemptUsage(
                order.task, attempt.number, usage.cost_usd, usage.input_tokens, usage.output_tokens
            )
        )
    return done(record, _verdict(answer, verdict_file, order.timeout))


def _verdict(answer: Answer, verdict_file: Path, timeout: float) -> Verdict:
    """What the reviewer's run says: its verdict file, else its exit."""
    name = answer.agent
    if answer.stopped:
        return Verdict(ReviewVerdict.STOPPED, messages.STOPPED, name)
    written = _read_verdict(verdict_file)
    if written is not None:
        return Verdict(ReviewVerdict(written[0]), written[1], name)
    infra = answer.infra
    if infra is not None:
        message = messages.infra(infra.kind, infra.message)
        return Verdict(ReviewVerdict.INFRA, message, name, infra.kind, infra.retry_after)
    if answer.timed_out:
        return Verdict(ReviewVerdict.INFRA, messages.review_timed_out(timeout), name, "timeout")
    if answer.returncode == 0:
        return Verdict(ReviewVerdict.APPROVE, "", name)
    # A JSON CLI's own message says it; else the output's tail.
    findings = cli_message(answer.output) or proc.tail(answer.output, FINDINGS_LINES)
    return Verdict(
        ReviewVerdict.REJECT, findings or messages.reviewer_exited(answer.returncode), name
    )


def _done(place: Place, task: str, attempt: Attempt, record: Review, verdict: Verdict) -> Verdict:
    done = replace(record, verdict=verdict.verdict, findings=verdict.findings or None)
    place.record(ev.Reviewed(task, attempt.number, done))
    return verdict


def outcome_of(
    verdict: Verdict, place: Place, task: str, attempt: Attempt, findings: Path
) -> Outcome | None:
    """What a verdict makes of the attempt: None when it approves; a rejection's
    findings are written to `findings`, the feedback of the next attempt."""
    if verdict.verdict == ReviewVerdict.APPROVE:
        return None
    if verdict.verdict == ReviewVerdict.STOPPED:
        return Outcome(Status.INTERRUPTED, messages.REVIEW_STOPPED)
    if verdict.verdict == ReviewVerdict.INFRA:
        return Outcome(
            Status.INFRA,
            messages.reviewed(verdict.findings),
            infra_retry_after=verdict.retry_after,
            infra_kind=verdict.infra_kind,
            infra_agent=verdict.agent,
        )
    findings.write_text((verdict.findings or "(no findings given)") + "\n")
    place.record(ev.FeedbackNoted(task, attempt.number, str(findings), records.REVIEWED))
    line = " ".join(verdict.findings.split())[:200] or messages.NO_FINDINGS
    return Outcome(Status.FAILED, messages.reviewed(line))


def diff_text(repo: Repository, base: str, head: str) -> str:
    diff = repo.git("diff", "--no-color", "--no-ext-diff", base, head)
    if len(diff) > DIFF_LIMIT:
        cut = len(diff) - DIFF_LIMIT
        diff = diff[:DIFF_LIMIT] + f"\n... ({cut} more characters of diff cut)\n"
    return diff


def _read_verdict(path: Path) -> tuple[str, str] | None:
    """(approve|reject, findings) from the verdict file; None when there is no
    usable one (then the exit code decides)."""
    try:
        data = json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError, RecursionError):  # a reviewer's file: anything at all
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
