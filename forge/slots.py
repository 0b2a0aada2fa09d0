"""The pool of worktree slots of one plan run: which slot holds which task's work.

Assignments live in the run state and are saved before the worktree is touched,
so a crash between the two leaves a slot the next run recognises.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from forge import worktrees
from forge.git import Repository
from forge.runstate import RunState, Slot, StateStore


class SlotPool:
    def __init__(
        self, repo: Repository, root: Path, state: RunState, store: StateStore, *, clean_all: bool
    ) -> None:
        self.repo = repo
        self.root = root
        self.state = state
        self.store = store
        self.clean_all = clean_all
        self._lock = threading.Lock()
        worktrees.prune(repo)  # registrations of worktrees whose folders are gone

    def acquire(self, task: str, base: str) -> Acquired:
        """The slot for `task` (its own if it holds one), recorded, then made to exist."""
        with self._lock, self.store.lock:
            ts = self.state.tasks[task]
            slot = self.state.slots.get(ts.slot or "")
            if slot is None or slot.task not in (None, task):
                slot = next(
                    (s for s in sorted(self.state.slots.values(), key=_order) if s.task is None),
                    None,
                )
            if slot is None:
                n = 1
                while f"slot-{n}" in self.state.slots:
                    n += 1
                name = f"slot-{n}"
                slot = Slot(name=name, path=str(self.root / name))
                self.state.slots[name] = slot
            was_clean = slot.clean
            slot.task = task
            slot.clean = False  # from now on it may hold the task's uncommitted work
            ts.slot = slot.name
            self.store.save(self.state)
        path = Path(slot.path)
        created = False
        if not worktrees.is_worktree(path):
            slot.setup_done = False
            worktrees.add(self.repo, path, base)
            created = True
        return Acquired(slot, created=created, clean=created or was_clean)

    def mark_setup(self, slot: Slot) -> None:
        # Not saved on its own: losing it to a crash only runs the setup once more.
        slot.setup_done = True

    def release(self, task: str) -> None:
        """Give the merged task's slot back to the pool. Its work is committed and
        merged, so the slot is clean by construction: the next task skips the look.
        Saved with the task's final state, not on its own."""
        with self._lock, self.store.lock:
            ts = self.state.tasks[task]
            slot = self.state.slots.get(ts.slot or "")
            ts.slot = None
            if slot is not None and slot.task == task:
                slot.task = None
                slot.clean = True
        if slot is not None:
            worktrees.detach(self.repo, Path(slot.path))

    def free_merged(self) -> None:
        """Slots still held by merged tasks (a run killed before it released them)."""
        for slot in self.state.slots.values():
            owner = self.state.tasks.get(slot.task or "")
            if slot.task is not None and (owner is None or owner.status == "MERGED"):
                slot.task = None
                if owner is not None:
                    owner.slot = None


@dataclass(frozen=True)
class Acquired:
    slot: Slot
    created: bool  # just added: its setup has not run
    clean: bool  # known to hold no uncommitted work: no need to look


def _order(slot: Slot) -> tuple[int, str]:
    tail = slot.name.rpartition("-")[2]
    return (int(tail) if tail.isdigit() else 1 << 30, slot.name)
