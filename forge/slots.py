"""The pool of worktree slots of one plan run: which slot holds which task's work.

Assignments live in the run state and are saved before the worktree is touched,
so a crash between the two leaves a slot the next run recognises.
"""

from __future__ import annotations

import threading
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

    def acquire(self, task: str, base: str) -> tuple[Slot, bool]:
        """The slot for `task` (its own if it holds one), recorded, then made to exist.
        Returns the slot and whether it is new (its setup has not run)."""
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
            slot.task = task
            ts.slot = slot.name
            self.store.save(self.state)
        path = Path(slot.path)
        if not worktrees.is_worktree(path):
            slot.setup_done = False
            worktrees.add(self.repo, path, base)
        return slot, not slot.setup_done

    def mark_setup(self, slot: Slot) -> None:
        with self.store.lock:
            slot.setup_done = True
            self.store.save(self.state)

    def release(self, task: str) -> None:
        """Give the task's slot back to the pool (only after its MERGED state is saved)."""
        with self._lock, self.store.lock:
            ts = self.state.tasks[task]
            slot = self.state.slots.get(ts.slot or "")
            ts.slot = None
            if slot is not None and slot.task == task:
                slot.task = None
            self.store.save(self.state)
        if slot is not None:
            worktrees.detach(self.repo, Path(slot.path))


def _order(slot: Slot) -> tuple[int, str]:
    tail = slot.name.rpartition("-")[2]
    return (int(tail) if tail.isdigit() else 1 << 30, slot.name)
