"""A slot of this machine's pool as the place an attempt's steps run
(forge.run.attempt.steps): a worktree of the repository on the task's branch,
its commands run by the attempt's one runner, its phases and changes recorded
in the run state as they happen."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path

from forge.base import procgroup
from forge.git import borrowed, worktrees
from forge.git import merge as integrate
from forge.run.attempt.context import AttemptScope, Command, group
from forge.run.attempt.phases import phase
from forge.run.attempt.reset import Start, reset_for_attempt
from forge.run.state import events as ev
from forge.run.state.folders import agent_state_dir
from forge.run.state.run_state import Slot
from forge.verify import environment


class LocalSlot:
    def __init__(self, scope: AttemptScope, path: Path, slot: Slot, new: bool) -> None:
        self.scope = scope
        self.slot = path
        self.logs = scope.dir
        self.state_dir = agent_state_dir(scope.ctx.repo, scope.ctx.plan.name)
        self.stop: threading.Event = scope.ctx.stop
        self.sandboxed = scope.ctx.sandbox
        self._pooled = slot
        self._new = new

    def group(self, command: Command) -> procgroup.GroupResult:
        c = command
        res = group(
            self.scope.ctx,
            command,
            cwd=self.slot,
            attempt=self.scope.attempt,
            task=self.scope.task.id,
        )
        if res.left:  # stopped: named, so the task's result says what tried to stay
            self.warn(f"{c.log.stem} left processes running, stopped: {', '.join(res.left)}")
        return res

    def phase(self, name: str, *, save: bool = False) -> AbstractContextManager[object]:
        return phase(self.scope.ctx, self.scope.task.id, self.scope.attempt, name, save=save)

    def set_up(self) -> None:
        if self._new:
            self.scope.ctx.slots.mark_setup(self._pooled)

    def commit(self, message: str) -> str:
        ts = self.scope.ts
        assert ts.branch is not None and ts.base is not None
        head = worktrees.commit_all(self.scope.ctx.repo, self.slot, message, branch=ts.branch)
        # Its objects are the user's own, not borrowed from the slot (forge.git.borrowed).
        borrowed.make_real(self.scope.ctx.repo, [head], since=[ts.base])
        return head

    def shares_history(self, base: str, head: str) -> bool:
        return integrate.shares_history(self.scope.ctx.repo, base, head)

    def changed(self, base: str, head: str) -> list[str]:
        return integrate.changed(self.scope.ctx.repo, base, head)

    def tree(self, commit: str) -> str:
        return self.scope.ctx.repo.tree_of(commit)

    def restore(self, commit: str | None = None) -> None:
        """Back to the committed work (or to `commit`), nothing else in the tree."""
        worktrees.restore(self.scope.ctx.repo, self.slot, commit)

    def warn(self, message: str) -> None:
        self.scope.ctx.record(ev.Warned(self.scope.task.id, message), later=True)

    def saved(self) -> None:
        self.scope.ctx.record()
        self.scope.ctx.on_change(self.scope.task.id)

    def record(self, event: ev.Event) -> None:
        self.scope.ctx.record(event, later=True)


def prepare(scope: AttemptScope) -> tuple[LocalSlot, str]:
    """A slot on the task's branch, reset to where this attempt starts. Returns the
    slot and the commit the attempt starts from."""
    ctx, task, ts, attempt = scope.ctx, scope.task, scope.ts, scope.attempt
    repo = ctx.repo
    assert ts.base is not None and ts.branch is not None
    # The task's branch is made by its first commit (worktrees.commit_all): until
    # then the attempt starts from the pinned base, and a git process is saved.
    with phase(ctx, task.id, attempt, "worktree"):
        got = ctx.slots.acquire(task.id, ts.base)
        slot, new = got.slot, not got.slot.setup_done
        ctx.record(ev.RanIn(task.id, attempt.number, slot=slot.name), later=True)
        path = Path(slot.path)
        # One look at the slot per attempt, none when it is clean by construction; after
        # reset_for_attempt it is clean (anything found was salvaged, then cleared).
        start_head, salvaged = reset_for_attempt(
            repo,
            ctx.plan,
            ts,
            path,
            start=Start(
                fresh=scope.fresh,
                shell=task.run is not None,
                integration_head=repo.ref_value(ctx.state.integration),
                known_clean=got.clean,
            ),
            record=partial(ctx.record, later=True),
        )
        if salvaged:
            ctx.record()
            ctx.on_change(task.id)
        # A slot taken over from another plan holds what setup made at its old folder
        # (a virtualenv's scripts name it): removed, and the setup runs again here.
        moved = environment.moved(path)
        worktrees.move(
            repo,
            path,
            ts.branch,
            clean_all=ctx.plan.clean == "all" or moved,
            known_clean=True,
            commit=start_head,
        )
        if moved:
            environment.forget(path)
    return LocalSlot(scope, path, slot, new), start_head
