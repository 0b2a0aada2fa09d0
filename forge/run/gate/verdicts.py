"""What the gate writes for the tasks of a batch that never reach a verification:
those whose work does not merge onto the chain (CONFLICT, or refused) and those
whose work is on the head already (MERGED as they are)."""

from __future__ import annotations

from collections.abc import Callable

from forge.git.merge import conflict_reason
from forge.run.attempt import phases
from forge.run.context import RunContext
from forge.run.gate import bisection as gate
from forge.run.records import history
from forge.run.state import events as ev
from forge.run.state.records import MERGED
from forge.run.state.run_state import Status


def conflicts(
    ctx: RunContext,
    chain: gate.Chain,
    conflict_by: dict[str, list[str]],
    on_event: Callable[[str], None],
) -> None:
    """Each task of `chain` that conflicts (with the tasks `conflict_by` names) or
    was refused: CONFLICT, its paths in its attempt's merge.log."""
    found = {tid: ("conflicting paths", paths) for tid, paths in chain.conflicts.items()}
    found |= {tid: ("", (why,)) for tid, why in chain.refused.items()}
    for tid, (what, paths) in found.items():
        ts = ctx.state.tasks[tid]
        last = ts.last
        assert last is not None
        log = ctx.logs / tid / f"attempt-{last.number}" / "merge.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"{what or 'not merged'}:\n" + "\n".join(paths) + "\n")
        with ctx.store.lock:
            # (refused: the one line says why)
            why = conflict_reason(paths, conflict_by.pop(tid, ())) if what else paths[0]
            failed = ev.Failed(tid, Status.CONFLICT, why, str(log), MERGED)
            ctx.emit(*phases.end(tid, last), failed)
        history.settle(ctx, [tid])
        on_event(f"{tid}: CONFLICT ({ts.reason})")


def already(ctx: RunContext, chain: gate.Chain, head: str) -> None:
    """Each task of `chain` whose work is on `head` already: MERGED there."""
    for tid in chain.already:
        ts = ctx.state.tasks[tid]
        with ctx.store.lock:
            ctx.emit(
                ev.Merged(tid, head, ctx.plan.task(tid).definition()), *phases.end(tid, ts.last)
            )
        history.settle(ctx, [tid])
