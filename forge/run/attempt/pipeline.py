"""One attempt of one task, from slot to merge.

slot (here, or a cluster worker's) -> the attempt's steps (forge.run.attempt.steps:
setup, agent or shell command, commit, scope, no progress, task check) -> review
-> merge into integration, or the gate's queue. Each step records its status
before it acts; the first failing step ends the attempt with a status and a
one-line reason.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base import faults
from forge.base.files import DiskFull, atomic_write_text, is_full
from forge.git import gitfiles
from forge.git import merge as integrate
from forge.git.contained import Tampered
from forge.git.refs import task_ref
from forge.git.trailers import tasks_phrase
from forge.plan.model import Task
from forge.run.attempt import local, messages, phases
from forge.run.attempt.context import Asked, AttemptScope, Outcome, Remote
from forge.run.attempt.local import LocalSlot
from forge.run.attempt.merging import merge_and_record
from forge.run.attempt.order import order_for
from forge.run.attempt.steps import run_steps
from forge.run.context import RunContext
from forge.run.records import history, routing
from forge.run.state import events as ev
from forge.run.state.run_state import Attempt, Status

if TYPE_CHECKING:
    from forge.agents.spec import AgentSpec


class _Stop(Exception):
    """Ends an attempt early with an outcome."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


def run_attempt(
    ctx: RunContext,
    task: Task,
    *,
    spec: AgentSpec | None,
    asked: Asked = Asked(),
    remote: Remote | None = None,
) -> Outcome:
    """Run one attempt of `task` and leave its outcome in the state.

    `spec` is the agent spec of a prompt task (None for a `run` task); `asked`,
    how the attempt was asked for; `remote`, where it runs when not on this machine
    (a cluster: the dispatcher's).
    """
    ts = ctx.state.record(task.id)  # (a best-of-N candidate's record is its own)
    started = time.monotonic()
    number = len(ts.attempts) + 1
    tag = f"{ctx.plan.name}/{task.id}/{number}/{os.getpid()}"
    attempt = Attempt(
        number=number,
        agent="run" if spec is None else str(spec),
        model=None if spec is None else spec.model,
        effort=None if spec is None else spec.effort,
        tag=tag,
        fallback=asked.fallback,
    )
    attempt = routing.stamp(ctx, task.id, attempt)
    attempt_dir = ctx.logs / task.id / f"attempt-{number}"
    attempt_dir.mkdir(parents=True, exist_ok=True)
    with ctx.store.lock:
        base = ts.base if ts.base is not None else ctx.repo.ref_value(ctx.state.integration)
        ctx.record(
            ev.AttemptStarted(task.id, attempt, ctx.owner),
            ev.Pinned(task.id, base, task_ref(ctx.plan.name, task.id)),
        )
    scope = AttemptScope(
        ctx, task, ts, attempt, attempt_dir, spec, asked.fresh, asked.person, remote
    )
    try:
        outcome = _steps(scope)
    except _Stop as stop:
        outcome = stop.outcome
    except Tampered as exc:
        outcome = Outcome(Status.FAILED, messages.broken_git(exc))
    except Exception as exc:  # a bug or an unexpected git failure: record, don't lose state
        if is_full(exc):
            # Nobody's failure: the run pauses, this attempt spent nothing.
            ctx.stop.set()
            with contextlib.suppress(OSError):
                _finish(scope, Outcome(Status.INTERRUPTED, messages.DISK_FULL), started)
            raise DiskFull(exc, resume="`forge run`") from exc
        outcome = Outcome(Status.FAILED, _keep_traceback(attempt_dir, exc))
    except BaseException as exc:
        # Ctrl-C or SystemExit reaching this thread stops the run; it is not the
        # task's failure: the attempt is INTERRUPTED (spent nothing) and the
        # exception goes on to the caller.
        ctx.stop.set()
        interrupted = Outcome(Status.INTERRUPTED, messages.forge_stopped(exc))
        _finish(scope, interrupted, started)
        raise
    return _finish(scope, outcome, started)


def _keep_traceback(attempt_dir: Path, exc: Exception) -> str:
    """Write the traceback of an unexpected exception beside the attempt's logs and
    return the reason that points at it (the message alone rarely tells the bug)."""
    path = attempt_dir / "forge-error.txt"
    try:
        atomic_write_text(path, "".join(traceback.format_exception(exc)))
    except OSError:
        return f"forge error: {exc}"
    return f"forge error: {exc} (traceback in {path})"


def _finish(scope: AttemptScope, outcome: Outcome, started: float) -> Outcome:
    ctx, task, attempt = scope.ctx, scope.task, scope.attempt
    if outcome.status in (Status.MERGED, Status.QUEUED) and scope.remote is None:
        # Its work is committed on its branch (and merged, or queued for the gate).
        ctx.slots.release(task.id)
    duration = round(time.monotonic() - started, 3)
    with ctx.store.lock:
        ctx.record(
            ev.AttemptEnded(
                task.id, outcome.status, outcome.reason, outcome.stall, duration, outcome.infra_kind
            )
        )
    history.record(ctx, task, attempt)
    return outcome


def _steps(scope: AttemptScope) -> Outcome:
    ctx, attempt = scope.ctx, scope.attempt
    assert scope.ts.base is not None and scope.ts.branch is not None
    done = _here(scope) if scope.remote is None else scope.remote.attempt(scope)
    undone = gitfiles.repair(ctx.repo, ctx.kept) if ctx.kept is not None else []
    if undone:
        why = done.reason if isinstance(done, Outcome) else ""
        return Outcome(Status.FAILED, messages.git_files_put_back(undone, why))
    if isinstance(done, Outcome):
        return _said_why_nothing(scope, done)
    faults.point("before-merge")
    _check_stop(ctx)
    if ctx.gated:
        # ended by the gate when the task leaves it
        ctx.record(phases.begin(scope.task.id, attempt.number, "queue"), later=True)
        return Outcome(Status.QUEUED, "")  # the gate verifies it with others, then lands it
    with phases.phase(ctx, scope.task.id, attempt, "merge"):
        return _merge(scope, done)


def _said_why_nothing(scope: AttemptScope, outcome: Outcome) -> Outcome:
    """A bare `no changes` says which landed task changed the task's files: the
    change it was asked for may be there already."""
    if outcome.reason != messages.NO_CHANGES:
        return outcome
    ctx, task = scope.ctx, scope.task
    by = integrate.landed_tasks(ctx.repo, ctx.state.integration, task.files, plan=ctx.plan.name)
    by = [tid for tid in by if tid != task.id]
    if not by:
        return outcome
    who = tasks_phrase(by)
    return replace(outcome, reason=messages.no_changes_landed(who))


def _here(scope: AttemptScope) -> Outcome | str:
    """The attempt's steps in a slot of this machine, then its review; the Outcome
    that ended it, or the commit to merge."""
    place, start_head = local.prepare(scope)
    order = order_for(scope)  # after the slot's reset, which may move the task's base
    _check_stop(scope.ctx)
    head = run_steps(order, place, scope.attempt, start_head)
    if isinstance(head, Outcome) or scope.ctx.plan.review_of(scope.task) is None:
        return head
    with place.phase("review"):
        reviewed = _review(scope, place, head, start_head)
    return head if reviewed is None else reviewed


def _review(scope: AttemptScope, place: LocalSlot, head: str, start_head: str) -> Outcome | None:
    """The reviewer gate (forge.run.attempt.review); None when it approves or there is none."""
    from forge.run.attempt import review

    ctx, ts, attempt = scope.ctx, scope.ts, scope.attempt
    verdict = review.judge(scope, place, head)
    if verdict is None:
        return None
    # The reviewer may have written into the worktree, or even committed: the
    # work it judged is `head`, and that is what the branch keeps.
    place.restore(head)
    if verdict.verdict == "approve":
        place.saved()
    if verdict.verdict == "infra":
        # Nothing judged the work, and an INFRA attempt spends nothing: take the
        # change back, or the next attempt would find it done and change nothing.
        place.restore(start_head)
        assert ts.branch is not None
        if ctx.repo.ref_value(ts.branch) == head:  # the slot's branch is not the user's
            ctx.repo.update_ref(ts.branch, start_head, head, message="forge: review could not run")
    return review.outcome_of(verdict, place, scope.task.id, attempt, scope.dir / review.FINDINGS)


def _merge(scope: AttemptScope, head: str) -> Outcome:
    verdict = merge_and_record(scope.ctx, scope.task, head)
    if isinstance(verdict, ev.Failed):
        return Outcome(verdict.status, verdict.reason)
    return Outcome(Status.MERGED, "")


def _check_stop(ctx: RunContext) -> None:
    if ctx.stop.is_set():
        raise _Stop(Outcome(Status.INTERRUPTED, messages.STOPPED))
