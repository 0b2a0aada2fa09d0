"""The steps of one attempt, the same in a local slot and on a cluster worker:

setup (once per slot) -> the agent or shell command -> commit -> nothing changed?
-> scope -> no progress? -> the task's check.

Each step is a function of the WorkOrder (what to do), the Place (where it runs:
forge.run.attempt.local, or the cluster worker) and the Attempt record it fills
in (its log, its commit and change, what judged it). The first failing step ends
the attempt with an Outcome; its reason is one of forge.run.attempt.messages.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from pathlib import Path

from forge.base import faults
from forge.base.text import one_line
from forge.git import trailers
from forge.git.worktrees import NestedRepository
from forge.plan.patterns import out_of_scope
from forge.run.attempt import messages
from forge.run.attempt.context import Command, Outcome, Place, last_line
from forge.run.attempt.order import WorkOrder
from forge.run.attempt.work import run_work
from forge.run.state import events as ev
from forge.run.state import records
from forge.run.state.run_state import Attempt, Stall, Status
from forge.verify import environment


def run_steps(order: WorkOrder, place: Place, attempt: Attempt, start: str) -> Outcome | str:
    """Run the attempt's steps from the commit `start`; the Outcome that ended it, or
    the commit of the work that passed them all."""
    env = environment.expand(order.env, place.slot)
    failed = setup(order, place, attempt, env)
    if failed is not None:
        return failed
    work_started = time.monotonic()
    with place.phase("agent" if order.agent is not None else "run"):
        failed = run_work(order, place, attempt, env)
    if failed is not None:
        keep_judged_work(order, place, attempt, failed, start)
        return failed
    faults.point("after-agent")
    head = commit_and_judge(order, place, attempt, start)
    if isinstance(head, Outcome):
        return head
    return check(order, place, attempt, env, work_started) or head


def setup(
    order: WorkOrder, place: Place, attempt: Attempt, env: Mapping[str, str]
) -> Outcome | None:
    """The plan's setup in the slot when it needs it: once per slot, and again when
    the setup or env changed, when `clean = "all"` removed what it made, or when
    what it made changed since (named in the task's warnings)."""
    digest = environment.setup_hash(order.setup, order.env)
    done = bool(order.setup) and environment.is_set_up(place.slot, digest)
    changed = environment.products_changed(place.slot) if done and not order.clean_all else []
    if changed:  # (an earlier task wrote into them: a `.pth` would run in this one)
        place.warn(environment.products_warning(changed))
        environment.remove_products(place.slot)
    if order.setup and (order.clean_all or changed or not done):
        log = place.logs / "setup.log"
        limit = order.setup_timeout
        with place.phase("setup", save=True):
            res = place.group(Command(order.setup, log, limit, env, cache=True))
        if res.stopped:
            return Outcome(Status.INTERRUPTED, messages.SETUP_STOPPED)
        if res.timed_out:
            place.record(ev.FeedbackNoted(order.task, attempt.number, log=str(log)))
            return Outcome(Status.TIMEOUT, messages.setup_timed_out(limit))
        if res.returncode != 0:
            place.record(ev.FeedbackNoted(order.task, attempt.number, log=str(log)))
            return Outcome(Status.FAILED, messages.setup_failed(last_line(log)))
        environment.mark_set_up(place.slot, digest)
        environment.record_products(place.slot)
    place.set_up()
    return None


def keep_judged_work(
    order: WorkOrder, place: Place, attempt: Attempt, outcome: Outcome, start: str
) -> None:
    """Keep what a failed or timed-out attempt left, so the retry fixes its own work."""
    if outcome.status in (Status.FAILED, Status.TIMEOUT):
        commit = place.commit(trailers.with_body(order.message, "(failed attempt)"))
        if commit != start:
            diff_hash = change_hash(order.base, place.tree(commit))
            place.record(ev.Committed(order.task, attempt.number, commit, diff_hash))


def _cli_error(order: WorkOrder, attempt: Attempt) -> str | None:
    """What the agent's CLI printed as its error, when its preset knows the words."""
    if order.agent is None or not order.agent[0].error_patterns or attempt.log is None:
        return None
    from forge.agents import spec as agents
    from forge.base import logs

    return agents.said_error(order.agent[0], logs.tail(Path(attempt.log), logs.ANALYSIS_BYTES))


def commit_and_judge(order: WorkOrder, place: Place, attempt: Attempt, start: str) -> str | Outcome:
    """Commit the work and judge the change itself: empty, out of scope, or the same
    as a rejected one. Returns the commit, or the outcome that ends the attempt."""
    try:
        head = place.commit(order.message)
    except NestedRepository as exc:  # (its `.git` removed: a retry starts from its files)
        return Outcome(Status.FAILED, str(exc))
    faults.point("after-commit")
    if head == start:
        said = _cli_error(order, attempt)
        if said is not None:  # a CLI that exits 0 after an API error (aider's 400)
            return Outcome(Status.FAILED, messages.cli_error(said))
        return Outcome(Status.FAILED, messages.NO_CHANGES, stall=Stall.NO_CHANGES)
    if not place.shares_history(order.base, head):  # re-inited, or a parentless commit
        return Outcome(Status.CONFLICT, messages.NO_SHARED_HISTORY)
    diff_hash = change_hash(order.base, place.tree(head))
    place.record(ev.Committed(order.task, attempt.number, head, diff_hash))
    changed = place.changed(order.base, head)
    if not changed:
        return Outcome(Status.FAILED, messages.NO_NET_CHANGES, stall=Stall.NO_CHANGES)
    outside = out_of_scope(order.files, changed)
    if outside:
        msg = messages.out_of_scope(", ".join(one_line(p) for p in outside[:8]))
        if not order.scope_warn:
            place.record(ev.FeedbackNoted(order.task, attempt.number, source=records.SCOPE))
            return Outcome(Status.FAILED, msg)
        place.warn(msg)
    if order.judged_hash is not None and order.judged_hash == attempt.diff_hash:
        return Outcome(Status.FAILED, messages.NO_PROGRESS, stall=Stall.NO_PROGRESS)
    place.saved()
    return head


def check(
    order: WorkOrder,
    place: Place,
    attempt: Attempt,
    env: Mapping[str, str],
    work_started: float,
) -> Outcome | None:
    """The task's own check, on the committed work, in what is left of the attempt's
    time. None when it passed (or there is none)."""
    if not order.check:
        return None
    log = place.logs / "check.log"
    limit = order.timeout
    left = limit - (time.monotonic() - work_started)
    if left <= 0:
        place.record(ev.FeedbackNoted(order.task, attempt.number, source=records.CHECK))
        return Outcome(Status.TIMEOUT, messages.check_not_run(limit))
    with place.phase("check"):
        res = place.group(Command(order.check, log, left, env, network=order.check_network))
    # The work is committed: a later attempt must start from the commit.
    place.restore()
    if res.stopped:
        return Outcome(Status.INTERRUPTED, messages.CHECK_STOPPED)
    if res.timed_out:
        place.record(ev.FeedbackNoted(order.task, attempt.number, str(log), records.CHECK))
        return Outcome(Status.TIMEOUT, messages.check_timed_out(limit))
    if res.returncode != 0:
        place.record(ev.FeedbackNoted(order.task, attempt.number, str(log), records.CHECK))
        return Outcome(Status.FAILED, messages.check_failed(last_line(log)))
    return None


def change_hash(base: str, tree: str) -> str:
    """Identifies the change an attempt made (here or on a cluster worker). The base
    is pinned, so two attempts' diffs are byte-identical exactly when their trees
    are: the tree id says it without computing a diff."""
    return hashlib.sha256(f"{base} {tree}".encode()).hexdigest()
