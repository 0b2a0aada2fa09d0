"""What an attempt's steps are asked to do (a WorkOrder), made from the run here and
carried out in a local slot or on a cluster worker alike.

A WorkOrder holds plain values only: it crosses to a cluster worker pickled, so
it carries no path of this machine, no repository and no credentials.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from forge.frozen import frozen
from forge.git import trailers
from forge.run.attempt.context import AttemptScope
from forge.run.state.records import by_gate
from forge.run.state.run_state import FAILURES, Attempt, counted

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.agents.spec import AgentSpec
    from forge.run.attempt.review import ReviewOrder


@frozen
class WorkOrder:
    task: str
    number: int  # the attempt's number in the task's history
    told: int  # the number the agent is told (INFRA tries are not attempts)
    base: str  # the task's pinned base: scope and progress are measured against it
    message: str  # commit message of the attempt's work
    files: tuple[str, ...]
    scope_warn: bool
    timeout: float  # the work and then the check share it
    run: str | None = None  # a shell task's command
    agent: tuple[AgentDef, AgentSpec] | None = None  # a prompt task's agent
    prompt_text: str = ""
    feedback_text: str | None = None
    setup: str | None = None
    setup_timeout: float = 0.0
    check: str | None = None
    check_network: bool = False  # the check keeps the network in the sandbox
    sockets: tuple[str, ...] = ()  # the sockets the plan passes into the sandbox
    host_ports: tuple[int, ...] = ()  # the host's loopback ports it reaches
    clean_all: bool = False
    env: tuple[tuple[str, str], ...] = ()  # the plan's `env`, expanded in the slot
    judged_hash: str | None = None  # the last judged failure's change: "no progress"
    strict_model: bool = False  # an agent that reports another model than asked is INFRA
    review: ReviewOrder | None = None  # the task's reviewer, for a cluster worker to run


def last_judged_hash(attempts: list[Attempt], *, person: bool = False) -> str | None:
    """The change of the last attempt among `attempts` that a judge rejected (see
    FeedbackSource.judged), if any: making it again is no progress. Not for a person's retry when
    the gate rejected it: a verification's failure may be a flake or the base's, and
    a person who asks again has the same change verified again."""
    judged = [
        a
        for a in attempts
        if a.status in FAILURES
        and a.diff_hash
        and a.feedback_source is not None
        and a.feedback_source.judged
    ]
    if not judged or (person and by_gate(judged[-1].feedback_source)):
        return None
    return judged[-1].diff_hash


def _review_order(scope: AttemptScope) -> ReviewOrder | None:
    """The review a cluster worker runs itself (forge.run.attempt.review)."""
    from forge.run.attempt.review import review_order

    return review_order(scope.ctx, scope.task)


def order_for(scope: AttemptScope) -> WorkOrder:
    """The order of `scope`'s attempt; a prompt task's prompt (with the feedback of
    a retry) is written into the attempt's folder too."""
    ctx, task, ts = scope.ctx, scope.task, scope.ts
    plan = ctx.plan
    assert ts.base is not None
    n = scope.attempt.number
    told = counted(ts.attempts[:-1]) + 1
    order = WorkOrder(
        task=task.id,
        number=n,
        told=told,
        base=ts.base,
        message=trailers.task_message(task.title, plan=plan.name, task=task.id, attempt=n),
        files=task.files,
        scope_warn=plan.scope == "warn",
        timeout=plan.timeout_of(task),
        run=task.run,
        setup=plan.setup,
        setup_timeout=plan.setup_timeout,
        check=task.check,
        check_network=task.network,
        sockets=plan.sockets,
        host_ports=plan.host_ports,
        clean_all=plan.clean == "all",
        env=tuple(plan.env.items()),
        judged_hash=last_judged_hash(ts.attempts[:-1], person=scope.person),
        strict_model=plan.strict_model,
        review=_review_order(scope) if scope.remote is not None else None,
    )
    if scope.spec is None:
        return order
    from forge.run.attempt import feedback

    defn, resolved = ctx.agents.resolve(scope.spec)
    fb = feedback.for_retry(ctx.repo, ts) if len(ts.attempts) > 1 else None
    fb = feedback.with_review(ctx.repo, plan.name, task.id, fb)
    prompt_file = scope.dir / "prompt.md"
    feedback.write_prompt(defn, prompt_file, plan=plan.name, task=task, attempt=told, fb=fb)
    return replace(
        order,
        agent=(defn, resolved),
        prompt_text=prompt_file.read_text(),
        feedback_text=feedback.render(fb) if fb is not None else None,
        timeout=plan.timeout_of(task, defn.timeout),
    )
