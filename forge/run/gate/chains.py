"""The gate's candidate chains: each queued task's work merged in turn onto the
integration head, with plumbing only (no ref moves), for the running batch and for
the speculations on the batches after it.

A chain remembers what the gate tells later: the tasks each candidate commit
carries (a verification's story names them) and, for a task whose work conflicts,
which landed tasks changed those paths since its base (its CONFLICT names them)."""

from __future__ import annotations

from collections.abc import Sequence

from forge.base.text import one_line
from forge.errors import ForgeError
from forge.git.merge import MergeResult, is_ancestor, landed_tasks, merge_onto
from forge.git.trailers import merge_message
from forge.run.context import RunContext
from forge.run.gate import bisection as gate


class Chains:
    """Builds candidate chains and keeps what they found out."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.tasks_of: dict[str, tuple[str, ...]] = {}  # candidate commit -> its tasks
        self.conflict_by: dict[str, list[str]] = {}  # task -> the tasks it conflicts with

    def build(self, head: str, tasks: Sequence[str]) -> gate.Chain:
        """The candidate chain of `tasks` on `head` (plumbing only, no ref moves)."""
        ctx = self.ctx
        tip = head
        steps: list[gate.Step] = []
        conflicts: dict[str, tuple[str, ...]] = {}
        already: list[str] = []
        refused: dict[str, str] = {}
        for tid in tasks:
            ts = ctx.state.tasks[tid]
            last = ts.last
            assert last is not None and last.commit is not None
            title = ctx.plan.task(tid).title
            message = merge_message(ctx.plan.name, tid, last.number, title)
            try:
                res = merge_onto(ctx.repo, tip, last.commit, message=message)
            except ForgeError as exc:  # a commit the chain cannot be built from
                res = MergeResult(merged=False, refused=one_line(str(exc))[:200])
            if res.refused:
                refused[tid] = res.refused
            elif not res.merged:
                conflicts[tid] = res.conflicts
                if ts.base is not None:  # who changed those paths since its base
                    since = f"{ts.base}..{tip}"
                    by = landed_tasks(ctx.repo, since, res.conflicts, plan=ctx.plan.name)
                    self.conflict_by[tid] = by
            elif res.already or res.commit is None:
                if is_ancestor(ctx.repo, last.commit, head):
                    already.append(tid)  # landed before a crash the recovery did not see
            else:
                tip = res.commit
                steps.append(gate.Step(tid, tip))
                self.tasks_of[tip] = tuple(s.task for s in steps)
        return gate.Chain(tuple(steps), conflicts, tuple(already), refused)
