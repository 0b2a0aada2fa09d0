"""Work merged into the integration branch without the gate, and recorded.

One way for the three places work lands at once: an attempt's own merge (no
gate), a task an earlier run left queued for a gate that is off now, and a
best-of-N task's chosen candidate. Each records the same verdict: Merged, or a
CONFLICT that names the conflicting paths (and who changed them), never one
that names none.
"""

from __future__ import annotations

from dataclasses import replace

from forge.base.text import one_line
from forge.git import merge as integrate
from forge.git.trailers import merge_message
from forge.plan.model import Task
from forge.run.context import RunContext
from forge.run.state import events as ev
from forge.run.state import records
from forge.run.state.run_state import Attempt, Status

MERGE_LOG = "merge.log"  # beside the attempt's logs: every conflicting path


def merge_and_record(
    ctx: RunContext, task: Task, commit: str, *, at: float | None = None
) -> ev.Merged | ev.Failed:
    """Merge `commit`, the work of `task`'s last attempt, into the integration
    branch with git's plumbing (no checkout) and record the verdict (`at`: when, its
    attempt's open phases ending then): Merged; or Failed as a CONFLICT whose reason names the
    conflicting paths and the landed tasks that changed them since the task's
    base, every path listed in the attempt's merge.log; or, when git refuses
    the merge (no shared history), Failed as a CONFLICT saying so."""
    ts = ctx.state.record(task.id)
    last = ts.last
    assert last is not None
    message = merge_message(ctx.plan.name, task.id, last.number, task.title)
    with ctx.merge_lock:
        res = integrate.merge_task(
            ctx.repo, ref=ctx.state.integration, task_commit=commit, message=message
        )
        verdict: ev.Merged | ev.Failed
        if res.merged:
            verdict = ev.Merged(task.id, res.commit, task.definition(), at=at)
        elif res.refused:
            why = res.refused
            verdict = ev.Failed(task.id, Status.CONFLICT, why, last.log, records.MERGED, at=at)
        else:
            verdict = replace(_conflict(ctx, task.id, last, res.conflicts), at=at)
        ctx.record(verdict)
    return verdict


def _conflict(ctx: RunContext, tid: str, last: Attempt, paths: tuple[str, ...]) -> ev.Failed:
    """The CONFLICT of `tid`'s last attempt: its paths written to its merge.log,
    and the landed tasks that changed them since its base named."""
    shown = [one_line(p) for p in paths]
    log = ctx.logs / tid / f"attempt-{last.number}" / MERGE_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("conflicting paths:\n" + "\n".join(shown) + "\n")
    base = ctx.state.record(tid).base
    since = f"{base}..{ctx.state.integration}" if base else ctx.state.integration
    by = integrate.landed_tasks(ctx.repo, since, paths, plan=ctx.plan.name)
    reason = integrate.conflict_reason(shown, by)
    return ev.Failed(tid, Status.CONFLICT, reason, str(log), records.MERGED)
