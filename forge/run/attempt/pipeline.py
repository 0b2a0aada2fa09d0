"""One attempt of one task, from slot to merge.

slot -> setup (once per slot) -> agent or shell command -> commit -> scope check
-> no-progress check -> task check -> merge into integration. Each step records
its status before it acts; the first failing step ends the attempt with a status
and a one-line reason.
"""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base import faults
from forge.base.files import atomic_write_text
from forge.base.text import one_line
from forge.git import merge as integrate
from forge.git import worktrees
from forge.git.contained import Tampered
from forge.git.refs import task_ref
from forge.git.repo import Repository
from forge.plan.model import Task
from forge.plan.patterns import out_of_scope
from forge.run import history, routing
from forge.run.attempt import phases
from forge.run.attempt.context import Outcome, RunContext, group, last_line
from forge.run.attempt.phases import phase
from forge.run.attempt.reset import reset_for_attempt
from forge.run.attempt.work import run_work, timeout_of
from forge.run.state.run_state import (
    FAILURES,
    Attempt,
    Slot,
    Stall,
    Status,
    TaskState,
)
from forge.verify import environment

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
    fresh: bool = False,
    fallback: str | None = None,
) -> Outcome:
    """Run one attempt of `task` and leave its outcome in the state.

    `spec` is the agent spec of a prompt task (None for a `run` task); `fallback`
    says why it is a fallback agent, when it is one.
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
        fallback=fallback,
    )
    routing.stamp(ctx, task.id, attempt)
    attempt_dir = ctx.logs / task.id / f"attempt-{number}"
    attempt_dir.mkdir(parents=True, exist_ok=True)
    with ctx.store.lock:
        ts.attempts.append(attempt)
        ts.status = Status.RUNNING
        ts.reason = ""
        ts.runner = ctx.owner
        if ts.base is None:
            ts.base = ctx.repo.ref_value(ctx.state.integration)
        ts.branch = task_ref(ctx.plan.name, task.id)
        ctx.save(task.id)
    try:
        outcome = _steps(ctx, task, ts, attempt, attempt_dir, spec=spec, fresh=fresh)
    except _Stop as stop:
        outcome = stop.outcome
    except Tampered as exc:
        outcome = Outcome(Status.FAILED, f"the task broke its worktree's git directory: {exc}")
    except Exception as exc:  # noqa: BLE001 a bug or an unexpected git failure: record, don't lose state
        outcome = Outcome(Status.FAILED, _keep_traceback(attempt_dir, exc))
    except BaseException as exc:
        # Ctrl-C or SystemExit reaching this thread stops the run; it is not the
        # task's failure: the attempt is INTERRUPTED (spent nothing) and the
        # exception goes on to the caller.
        ctx.stop.set()
        interrupted = Outcome(Status.INTERRUPTED, f"forge was stopped ({exc!r})")
        _finish(ctx, task, ts, attempt, interrupted, started)
        raise
    return _finish(ctx, task, ts, attempt, outcome, started)


def _keep_traceback(attempt_dir: Path, exc: Exception) -> str:
    """Write the traceback of an unexpected exception beside the attempt's logs and
    return the reason that points at it (the message alone rarely tells the bug)."""
    path = attempt_dir / "forge-error.txt"
    try:
        atomic_write_text(path, "".join(traceback.format_exception(exc)))
    except OSError:
        return f"forge error: {exc}"
    return f"forge error: {exc} (traceback in {path})"


def _finish(
    ctx: RunContext, task: Task, ts: TaskState, attempt: Attempt, outcome: Outcome, started: float
) -> Outcome:
    if outcome.status in (Status.MERGED, Status.QUEUED) and ctx.remote is None:
        # Its work is committed on its branch (and merged, or queued for the gate).
        ctx.slots.release(task.id)
    with ctx.store.lock:
        attempt.status = outcome.status
        attempt.reason = outcome.reason
        attempt.stall = outcome.stall
        attempt.duration = round(time.monotonic() - started, 3)
        attempt.pgid = None
        ts.status = outcome.status
        ts.reason = outcome.reason
        ts.runner = None
        ctx.save(task.id)
    history.record(ctx, task, attempt)
    return outcome


def _steps(
    ctx: RunContext,
    task: Task,
    ts: TaskState,
    attempt: Attempt,
    attempt_dir: Path,
    *,
    spec: AgentSpec | None,
    fresh: bool,
) -> Outcome:
    assert ts.base is not None and ts.branch is not None
    if ctx.remote is not None:
        done = ctx.remote.attempt(ctx, task, ts, attempt, attempt_dir, spec=spec, fresh=fresh)
        if isinstance(done, Outcome):
            return done
        faults.point("before-merge")
        _check_stop(ctx)
        if ctx.gated:
            phases.begin(attempt, "queue")  # ended by the gate when the task leaves it
            return Outcome(Status.QUEUED, "")  # the gate verifies it with others, then lands it
        return _merge(ctx, task, ts, attempt, attempt_dir, done)
    path, start_head, slot, new = _prepare_slot(ctx, task, ts, attempt, fresh=fresh)
    env = _setup(ctx, task, attempt, attempt_dir, path, slot, new)
    limit = timeout_of(ctx, task, spec)
    work_started = time.monotonic()
    with phase(ctx, task.id, attempt, "agent" if spec is not None else "run"):
        outcome = run_work(
            ctx, task, ts, attempt, attempt_dir, path, spec=spec, timeout=limit, env=env
        )
    message = f"forge: {ctx.plan.name}/{task.id} attempt {attempt.number}\n\n{task.title}"
    if outcome is not None:
        _keep_judged_work(ctx, ts, attempt, path, outcome, message, start_head)
        return outcome
    faults.point("after-agent")
    head = _commit_and_judge(ctx, task, ts, attempt, path, message, start_head)
    if isinstance(head, Outcome):
        return head
    checked = _check(ctx, task, attempt, attempt_dir, path, env, limit, work_started)
    if checked is not None:
        return checked
    if ctx.plan.review_of(task) is not None:
        with phase(ctx, task.id, attempt, "review"):
            reviewed = _review(ctx, task, ts, attempt, attempt_dir, path, head, start_head)
        if reviewed is not None:
            return reviewed
    faults.point("before-merge")
    _check_stop(ctx)
    if ctx.gated:
        phases.begin(attempt, "queue")  # ended by the gate when the task leaves it
        return Outcome(Status.QUEUED, "")  # the gate verifies it with others, then lands it
    with phase(ctx, task.id, attempt, "merge"):
        return _merge(ctx, task, ts, attempt, attempt_dir, head)


def _prepare_slot(
    ctx: RunContext, task: Task, ts: TaskState, attempt: Attempt, *, fresh: bool
) -> tuple[Path, str, Slot, bool]:
    """A slot on the task's branch, reset to where this attempt starts. Returns (its
    path, the commit the attempt starts from, the slot, whether it is new)."""
    repo = ctx.repo
    assert ts.base is not None and ts.branch is not None
    # The branch: created at the pinned base on the first attempt.
    if repo.ref_value(ts.branch) is None:
        repo.update_ref(ts.branch, ts.base, None, message="forge: task branch")
    with phase(ctx, task.id, attempt, "worktree"):
        got = ctx.slots.acquire(task.id, ts.base)
        slot, new = got.slot, not got.slot.setup_done
        attempt.slot = slot.name
        path = Path(slot.path)
        # One look at the slot per attempt, none when it is clean by construction; after
        # reset_for_attempt it is clean (anything found was salvaged, then cleared).
        start_head, salvaged = reset_for_attempt(
            repo,
            ctx.plan,
            ts,
            path,
            fresh=fresh,
            known_clean=got.clean,
            integration_head=repo.ref_value(ctx.state.integration),
            shell=task.run is not None,
        )
        if salvaged:
            ctx.save(task.id)
        worktrees.move(
            repo,
            path,
            ts.branch,
            clean_all=ctx.plan.clean == "all",
            known_clean=True,
            commit=start_head,
        )
    _check_stop(ctx)
    return path, start_head, slot, new


def _setup(
    ctx: RunContext,
    task: Task,
    attempt: Attempt,
    attempt_dir: Path,
    path: Path,
    slot: Slot,
    new: bool,
) -> dict[str, str]:
    """The plan's setup in the slot when it needs it; returns the plan's environment."""
    env = environment.expand(ctx.plan.env, path)
    digest = environment.setup_hash(ctx.plan.setup, ctx.plan.env)
    # Once per slot, and again when the setup or env changed, or when `clean = "all"`
    # removed what it made.
    if ctx.plan.setup and (ctx.plan.clean == "all" or not environment.is_set_up(path, digest)):
        log = attempt_dir / "setup.log"
        limit = ctx.plan.setup_timeout
        with phase(ctx, task.id, attempt, "setup", save=True):
            res = group(
                ctx, ctx.plan.setup, cwd=path, log=log, attempt=attempt, timeout=limit, env=env
            )
        if res.stopped:
            raise _Stop(Outcome(Status.INTERRUPTED, "stopped during setup"))
        if res.timed_out:
            attempt.log = str(log)
            raise _Stop(
                Outcome(Status.TIMEOUT, f"setup timed out after {limit:g}s (setup_timeout)")
            )
        if res.returncode != 0:
            attempt.log = str(log)
            raise _Stop(Outcome(Status.FAILED, f"setup failed: {last_line(log)}"))
        environment.mark_set_up(path, digest)
    if new:
        ctx.slots.mark_setup(slot)
    return env


def _keep_judged_work(
    ctx: RunContext,
    ts: TaskState,
    attempt: Attempt,
    path: Path,
    outcome: Outcome,
    message: str,
    start_head: str,
) -> None:
    """Keep what a judged attempt left, so the retry fixes its own work."""
    repo = ctx.repo
    assert ts.base is not None and ts.branch is not None
    if outcome.status in (Status.FAILED, Status.TIMEOUT):
        commit = worktrees.commit_all(
            repo, path, message + "\n\n(failed attempt)", branch=ts.branch
        )
        if commit != start_head:
            attempt.commit = commit
            attempt.diff_hash = _diff_hash(repo, ts.base, commit)


def _commit_and_judge(
    ctx: RunContext,
    task: Task,
    ts: TaskState,
    attempt: Attempt,
    path: Path,
    message: str,
    start_head: str,
) -> str | Outcome:
    """Commit the work and judge the change itself: empty, out of scope, or the same
    as a rejected one. Returns the commit, or the outcome that ends the attempt."""
    repo = ctx.repo
    assert ts.base is not None and ts.branch is not None
    head = worktrees.commit_all(repo, path, message, branch=ts.branch)
    faults.point("after-commit")
    if head == start_head:
        return Outcome(Status.FAILED, "no changes", stall=Stall.NO_CHANGES)
    if not integrate.shares_history(repo, ts.base, head):  # re-inited, or a parentless commit
        return Outcome(Status.CONFLICT, "its commit shares no history with its base")
    attempt.commit = head
    # NUL-separated: without -z git quotes any name that is not plain ASCII.
    changed = [
        p
        for p in repo.git("diff", "--name-only", "-z", "--no-renames", ts.base, head).split("\0")
        if p
    ]
    if not changed:
        return Outcome(
            Status.FAILED,
            "no changes (the work adds up to nothing against the base)",
            stall=Stall.NO_CHANGES,
        )
    outside = out_of_scope(task.files, changed)
    if outside:
        shown = ", ".join(one_line(p) for p in outside[:8])
        msg = f"changed files outside its declared files: {shown}"
        if ctx.plan.scope != "warn":
            attempt.diff_hash = _diff_hash(repo, ts.base, head)
            attempt.feedback_source = "scope"
            return Outcome(Status.FAILED, msg)
        ts.warnings.append(msg)
    attempt.diff_hash = _diff_hash(repo, ts.base, head)
    # Only a change that was itself judged and rejected (by the check, the scope or
    # a merge) makes the same change again "no progress"; an agent that exited
    # non-zero may have made the right change and been cut off.
    judged = [
        a
        for a in ts.attempts[:-1]
        if a.status in FAILURES
        and a.diff_hash
        and (a.feedback_source or "").startswith(("check", "scope", "review", "merge", "verify:"))
    ]
    if judged and judged[-1].diff_hash == attempt.diff_hash:
        return Outcome(
            Status.FAILED,
            "no progress: the same change as the last failed attempt",
            stall=Stall.NO_PROGRESS,
        )
    with ctx.store.lock:
        ctx.save(task.id)
    return head


def _check(
    ctx: RunContext,
    task: Task,
    attempt: Attempt,
    attempt_dir: Path,
    path: Path,
    env: dict[str, str],
    limit: float,
    work_started: float,
) -> Outcome | None:
    """The task's own check, on the committed work, in what is left of the attempt's
    time. None when it passed (or there is none)."""
    repo = ctx.repo
    if not task.check:
        return None
    log = attempt_dir / "check.log"
    # The attempt's timeout covers the check: it gets what the agent left.
    left = limit - (time.monotonic() - work_started)
    if left <= 0:
        attempt.feedback_source = "check"
        return Outcome(
            Status.TIMEOUT, f"check not run: the attempt's {limit:g}s timeout was used up"
        )
    with phase(ctx, task.id, attempt, "check"):
        res = group(ctx, task.check, cwd=path, log=log, attempt=attempt, timeout=left, env=env)
    # The check may have written into the worktree; the work is committed, so
    # restore the tree to it (a later attempt must start from the commit).
    worktrees.git(repo, path, "reset", "--quiet", "--hard", check=False)
    worktrees.git(repo, path, "clean", "-fdq", check=False)
    if res.stopped:
        return Outcome(Status.INTERRUPTED, "stopped during the check")
    if res.timed_out:
        attempt.log = str(log)
        attempt.feedback_source = "check"
        return Outcome(
            Status.TIMEOUT,
            f"check timed out (the attempt's {limit:g}s timeout includes the check)",
        )
    if res.returncode != 0:
        attempt.log = str(log)
        attempt.feedback_source = "check"
        return Outcome(Status.FAILED, f"check failed: {last_line(log)}")
    return None


def _review(
    ctx: RunContext,
    task: Task,
    ts: TaskState,
    attempt: Attempt,
    attempt_dir: Path,
    path: Path,
    head: str,
    start_head: str,
) -> Outcome | None:
    """The reviewer gate (forge.run.attempt.review); None when it approves or there is none."""
    from forge.run.attempt import review

    def started(pgid: int) -> None:
        attempt.pgid = pgid

    verdict = review.judge(ctx, task, ts, attempt, attempt_dir, path, head, on_start=started)
    if verdict is None:
        return None
    # The reviewer may have written into the worktree, or even committed: the
    # work it judged is `head`, and that is what the branch keeps.
    worktrees.git(ctx.repo, path, "reset", "--quiet", "--hard", head, check=False)
    worktrees.git(ctx.repo, path, "clean", "-fdq", check=False)
    if verdict.verdict == "approve":
        with ctx.store.lock:
            ctx.save(task.id)
        return None
    if verdict.verdict == "stopped":
        return Outcome(Status.INTERRUPTED, "stopped during the review")
    if verdict.verdict == "infra":
        # Nothing judged the work, and an INFRA attempt spends nothing: take the
        # change back, or the next attempt would find it done and change nothing.
        worktrees.git(ctx.repo, path, "reset", "--quiet", "--hard", start_head, check=False)
        assert ts.branch is not None
        if ctx.repo.ref_value(ts.branch) == head:  # the slot's branch is not the user's
            ctx.repo.update_ref(ts.branch, start_head, head, message="forge: review could not run")
        return Outcome(
            Status.INFRA,
            f"review: {verdict.findings}",
            infra_retry_after=verdict.retry_after,
            infra_kind=verdict.infra_kind,
            infra_agent=verdict.agent,
        )
    findings = attempt_dir / "review.md"
    findings.write_text((verdict.findings or "(no findings given)") + "\n")
    attempt.log = str(findings)
    attempt.feedback_source = "review"
    line = " ".join(verdict.findings.split())[:200] or "rejected without findings"
    return Outcome(Status.FAILED, f"review: {line}")


def _merge(
    ctx: RunContext, task: Task, ts: TaskState, attempt: Attempt, attempt_dir: Path, head: str
) -> Outcome:
    with ctx.merge_lock:
        res = integrate.merge_task(
            ctx.repo,
            ref=ctx.state.integration,
            task_commit=head,
            message=f"forge: merge {ctx.plan.name}/{task.id} (attempt {attempt.number})\n\n{task.title}",
        )
        if res.refused:
            return Outcome(Status.CONFLICT, res.refused)
        if not res.merged:
            log = attempt_dir / "merge.log"
            shown = [one_line(p) for p in res.conflicts]
            log.write_text("conflicting paths:\n" + "\n".join(shown) + "\n")
            attempt.log = str(log)
            attempt.feedback_source = "merge"
            return Outcome(
                Status.CONFLICT, f"conflicts with integration in: {', '.join(shown[:8])}"
            )
        with ctx.store.lock:
            ts.merged_commit = res.commit
            ts.merged_definition = task.definition()
            attempt.status = Status.MERGED
            ts.status = Status.MERGED
            ctx.save(task.id)
    return Outcome(Status.MERGED, "")


def _diff_hash(repo: Repository, base: str, head: str) -> str:
    return change_hash(base, repo.tree_of(head))


def change_hash(base: str, tree: str) -> str:
    """Identifies the change an attempt made (here or on a cluster worker). The base
    is pinned, so two attempts' diffs are byte-identical exactly when their trees
    are: the tree id says it without computing a diff."""
    return hashlib.sha256(f"{base} {tree}".encode()).hexdigest()


def _check_stop(ctx: RunContext) -> None:
    if ctx.stop.is_set():
        raise _Stop(Outcome(Status.INTERRUPTED, "stopped by the user"))
