"""`forge pr --watch`: follow the pull request until the host's word settles.

It settles when the pull request is merged (exit 0) or closed by a person (2), a
check fails (5: recorded as a verdict `hosted: NAME`), a review asks for changes
(5), or every check passed and no merge was asked for (0). A pending check decides
nothing; when no check is reported within `[host] checks_within`, that is said
and the watch ends. `notify` hears of a failing check, changes asked and a merge."""

from __future__ import annotations

import threading
import time

from forge.commands.pr.session import Handed, Say, Session, refresh, state_lines
from forge.errors import ExitCode
from forge.host.api import CheckState
from forge.host.record import PrRecord


def watch(session: Session, plan: str, rec: PrRecord, lines: list[str], *, say: Say) -> Handed:
    started = time.monotonic()
    told: set[str] = set()
    pause = threading.Event()  # never set: the poll's wait, interruptible by Ctrl-C
    while True:
        settled = _settled(rec, told, session, plan)
        if settled is not None:
            code, why = settled
            return Handed(plan, rec, [*lines, *state_lines(rec), why], code)
        waited = time.monotonic() - started
        if not rec.checks and waited >= session.table.checks_within:
            why = f"no checks reported after {waited:.0f}s: not waiting for them any longer"
            return Handed(plan, rec, [*lines, *state_lines(rec), why], ExitCode.OK)
        say(f"watching #{rec.number}: {rec.summary()}")
        pause.wait(session.table.poll)  # sleep-ok: the host is asked again after [host] poll
        rec = refresh(session, plan, rec)


def _settled(
    rec: PrRecord, told: set[str], session: Session, plan: str
) -> tuple[ExitCode, str] | None:
    failed = [c for c in rec.checks if c.state == CheckState.FAILED]
    if rec.state == "merged":
        _notify(session, plan, "ended", f"pull request #{rec.number} merged into {rec.base}", told)
        return ExitCode.OK, f"merged into {rec.base}: the plan's work is accepted upstream"
    if rec.state == "closed":
        return ExitCode.USAGE, f"#{rec.number} was closed without a merge (by a person)"
    if failed:
        names = ", ".join(f"hosted: {c.name}" for c in failed)
        _notify(session, plan, "needs_person", f"#{rec.number}: {names} failed", told)
        return ExitCode.FAILED, f"the host's checks failed: {names}"
    if rec.review == "CHANGES_REQUESTED":
        _notify(session, plan, "needs_person", f"#{rec.number}: changes requested", told)
        tasks = _reviewed_tasks(session, plan, rec.number or 0) or ["TASK"]
        retry = " or ".join(f"`forge retry {t} --review --plan {plan}`" for t in tasks)
        return ExitCode.FAILED, f"a review asks for changes: {retry} gives them to the agent"
    if rec.mergeable == "dirty":
        return ExitCode.FAILED, f"#{rec.number} conflicts with {rec.base}"
    done = rec.checks and all(c.state != CheckState.PENDING for c in rec.checks)
    if done and not session.auto_merge:
        return ExitCode.OK, "every check passed"
    return None


def _reviewed_tasks(session: Session, plan: str, number: int) -> list[str]:
    """The tasks whose `files` cover a path the review commented on."""
    from forge.plan import registry
    from forge.plan.patterns import covers

    paths = {c.path for c in session.host.review_comments(number) if c.path}
    tasks = registry.load_recorded(session.repo, plan).plan.tasks
    return [t.id for t in tasks if any(covers(f, p) for f in t.files for p in paths)]


def _notify(session: Session, plan: str, event: str, reason: str, told: set[str]) -> None:
    if reason in told:
        return
    told.add(reason)
    command = session.notify
    if not command:
        return
    from forge.base.clock import now_iso
    from forge.run.notify import Event, send

    code = ExitCode.OK if event == "ended" else ExitCode.FAILED
    send(
        command,
        Event(event, plan, [], reason, int(code), now_iso()),
        cwd=session.repo.root,
        logs=session.repo.state.logs_dir(plan),
    )
