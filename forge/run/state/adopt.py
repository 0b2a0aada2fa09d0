"""Slots outlive their plan: a new slot is first looked for among the idle slots of
the repository's other plans, and moved over (two renames) instead of checked out
anew. A checkout of a large tree costs seconds (50k files: 3-20 s here) and its
size on disk again; a plan that has finished needs its slots no more.

A slot is taken from another plan only while that plan's run lock is free (no
run, retry or clean of it is going on), the plan's state is readable, and the
slot holds nothing of anyone's: no task, or a task whose work has merged, and
nothing uncommitted when that plan last let it go. The taking plan records the
slot first (its state), then the other plan forgets it, then the folders move: a
crash at any point leaves at worst a slot a plan makes again, or a clean folder
no plan names, which `SlotPool` reuses by its name. The slot stays as clean as
its plan let it go (its last task's work committed and merged): it is trusted as
a slot of the same plan is from one run to the next, and its own `.git` is owed
anew, so nothing of the other plan's is read as a task's work.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from forge.base.files import plan_lock
from forge.errors import ForgeError
from forge.git import contained, worktrees
from forge.git.repo import Repository
from forge.run.state import events as ev
from forge.run.state.run_state import Slot, Status, TaskState
from forge.run.state.store import StateStore

_LOOK_AT = 16  # other plans looked at, most recently run first
# One taking at a time in this process: slots sought side by side would each find
# the other plan's run lock held by their neighbour, and take nothing.
_taking = threading.Lock()


def adopt(repo: Repository, plan: str, into: Sequence[Path]) -> list[Path]:
    """Move idle slots of other plans of `repo` to the folders `into` (slots of
    `plan`'s, recorded by the caller, not yet made), as many as can be had, each
    plan's taken under one hold of its lock. Returns the folders filled."""
    wanted = [p for p in into if not (os.path.lexists(p) or os.path.lexists(contained.view_dir(p)))]
    root = repo.worktrees_root()
    got: list[Path] = []
    with _taking:
        for other in _others(repo, plan):
            if len(got) == len(wanted):
                break
            with contextlib.suppress(ForgeError, OSError):
                _take_from(repo, other, root / other, wanted[len(got) :], got)
    return got


def may_adopt(repo: Repository, plan: str) -> bool:
    """Whether another plan of `repo` may have a slot to give (it has a state)."""
    return bool(_others(repo, plan))


def _others(repo: Repository, plan: str) -> list[str]:
    """The repository's other plans that have slots, most recently run first."""
    found = []
    for name in repo.state.recorded_plans():
        state_file = repo.state.state_file(name)
        if name != plan and state_file.exists():
            found.append((state_file.stat().st_mtime, name))
    return [name for _, name in sorted(found, reverse=True)[:_LOOK_AT]]


def _take_from(
    repo: Repository, other: str, folder: Path, into: list[Path], got: list[Path]
) -> None:
    """Idle slots of the plan `other` moved to the first folders of `into`; each
    folder filled is added to `got` as soon as its slot has moved."""
    with plan_lock(repo.state, other, command="forge run (taking an idle slot)"):
        store = StateStore(repo.state, other)
        state = store.load_existing()
        if state is None:
            return
        idle = [s for s in state.slots.values() if _idle(s, state.tasks, folder)]
        taken = [s for s in idle if worktrees.usable(repo, Path(s.path)) is None][: len(into)]
        if not taken:
            return
        into[0].parent.mkdir(parents=True, exist_ok=True)
        for slot in taken:
            store.record(state, ev.SlotRemoved(slot.name), later=True)
        store.save(state)  # that plan forgets them before they move
        kept = list(taken)  # still that plan's, unless moved
        try:
            for slot, dest in zip(taken, into, strict=False):
                try:
                    moved = _move(repo, Path(slot.path), dest)
                except OSError:
                    kept.remove(slot)  # half here: that plan forgets it
                    raise
                if moved:
                    got.append(dest)
                    kept.remove(slot)
        finally:
            if kept:  # nothing of them moved: still that plan's
                for slot in kept:
                    store.record(state, ev.SlotAdded(slot), later=True)
                store.save(state)


def _move(repo: Repository, path: Path, into: Path) -> bool:
    """The slot's folder and forge's git dir of it moved to `into`. False: nothing
    moved (an error after its git dir moved is raised: the slot is half here)."""
    view = contained.view_dir(path)
    try:
        if view.is_dir():
            view.rename(contained.view_dir(into))
        path.rename(into)
        # What its own `.git` names is the other plan's merged work, not commits of a
        # task of this plan's: superseded, put anew before this plan's first task.
        if contained.view_dir(into).is_dir():
            contained.Contained(repo, into).owe()
    except OSError:
        if view.exists() or not contained.view_dir(into).exists():
            return False
        raise
    return True


def _idle(slot: Slot, tasks: Mapping[str, TaskState], folder: Path) -> bool:
    owner = tasks.get(slot.task or "")
    free = slot.task is None or (owner is not None and owner.status == Status.MERGED)
    path = Path(slot.path)
    return free and slot.clean and path.parent == folder and worktrees.is_worktree(path)
