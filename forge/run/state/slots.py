"""The pool of worktree slots of one plan run: which slot holds which task's work.

Assignments live in the run state and are saved before the worktree is touched,
so a crash between the two leaves a slot the next run recognises. A new slot is
an idle one of another plan when there is one (forge.run.state.adopt), else a
checkout made in the background.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from forge.base import proc
from forge.frozen import frozen
from forge.git import worktrees
from forge.git.repo import Repository
from forge.run.state import events as ev
from forge.run.state.adopt import adopt, may_adopt
from forge.run.state.run_state import RunState, Slot, Status
from forge.run.state.store import StateStore


class SlotPool:
    """Slots are made in the background, a few at a time, and a ready task takes
    whichever slot is ready first: adding a worktree costs ~0.1-0.5 s per 1k files
    here, so short tasks are better served by one slot made at once (its files
    written by one worker per core: forge.git.contained.PARALLEL_CHECKOUT) than by
    several made side by side, which all arrive late (bench/DIAGNOSIS.md). Taking
    an idle slot of another plan is two renames: while other plans may have one,
    every waiting task's slot is sought at once, and only checkouts wait their
    turn."""

    def __init__(
        self,
        repo: Repository,
        root: Path,
        state: RunState,
        store: StateStore,
        *,
        clean_all: bool,
        on_ready: Callable[[], None] = lambda: None,
    ) -> None:
        self.repo = repo
        self.root = root
        self.state = state
        self.store = store
        self.clean_all = clean_all
        self.on_ready = on_ready
        self.error: str | None = None  # why the last slot could not be made
        self._lock = threading.Lock()
        self._making: set[str] = set()
        self._threads: list[threading.Thread] = []
        # Worktree adds at once: they compete for the same disk and cores.
        self._concurrency = max(1, (os.cpu_count() or 2) // 2)
        self._checkouts = threading.BoundedSemaphore(self._concurrency)
        self._may_adopt = may_adopt(repo, state.plan)
        # Set when the run needs no slot still being made: its checkout is stopped.
        self._stop_making = threading.Event()
        worktrees.prune(repo)  # registrations of worktrees whose folders are gone
        worktrees.sweep_discarded(root)
        proc.sweep_private_tmp()  # a sandbox's /tmp a `kill -9` of forge left

    def reserve(self, task: str) -> bool:
        """Give `task` a slot that exists now (its own, or a free one), recorded. False
        when none is ready: the caller asks for one with `grow`."""
        with self._lock, self.store.lock:
            ts = self.state.record(task)
            own = self.state.slots.get(ts.slot or "")
            if own is not None and own.task == task:
                return True  # a retry in its own slot (acquire remakes it if it is gone)
            for slot in sorted(self.state.slots.values(), key=_order):
                if slot.task is None and slot.name not in self._making:
                    self.store.record(self.state, ev.SlotTaken(slot.name, task, dirty=False))
                    return True
        return False

    def grow(self, base: str, *, wanted: int) -> None:
        """Start making slots in the background while fewer than `wanted` (ready tasks
        without a slot) are being made: one at a time when each is a checkout, all
        at once when idle slots of other plans may be taken."""
        made: list[Slot] = []
        with self._lock, self.store.lock:
            if self.error is not None:
                return
            limit = wanted if self._may_adopt else min(wanted, self._concurrency)
            n = 1
            while len(self._making) < limit:
                while f"slot-{n}" in self.state.slots:
                    n += 1
                slot = Slot(name=f"slot-{n}", path=str(self.root / f"slot-{n}"), clean=True)
                # recorded before the folder exists
                self.store.record(self.state, ev.SlotAdded(slot), later=True)
                self._making.add(slot.name)
                made.append(slot)
            if made:
                self.store.record(self.state)
        # Taken from other plans in one go (one hold of each one's lock), else each
        # checked out in a thread of its own.
        batches = [made] if self._may_adopt else [[slot] for slot in made]
        for batch in batches:
            if not batch:
                continue
            name = batch[0].name if len(batch) == 1 else "slots"
            thread = threading.Thread(target=self._make, args=(batch, base), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def _make(self, slots: list[Slot], base: str) -> None:
        # Taken over, a slot is clean as its plan let it go (forge had committed and
        # merged its last task's work), as a slot of this plan is from one run to the
        # next; its own `.git` is owed anew before the first command.
        taken: set[str] = set()
        if self._may_adopt:
            try:
                folders = adopt(self.repo, self.state.plan, [Path(s.path) for s in slots])
                taken = {str(p) for p in folders}
            except Exception:  # noqa: BLE001 (then they are checked out)
                taken = set()
            for slot in slots:
                if slot.path in taken:
                    self._made(slot)
            if len(taken) < len(slots):
                self._may_adopt = False  # none left to take: the next slots are checkouts
        for slot in slots:
            if slot.path not in taken:
                self._check_out(slot, base)

    def _check_out(self, slot: Slot, base: str) -> None:
        try:
            with self._checkouts:  # (a slot no longer wanted stops before it starts)
                worktrees.add(self.repo, Path(slot.path), base, stop=self._stop_making)
        except proc.Stopped:
            with self._lock, self.store.lock:  # no task took it: it never was
                if self.state.slots.get(slot.name) is slot and slot.task is None:
                    self.store.record(self.state, ev.SlotRemoved(slot.name))
        except Exception as exc:  # noqa: BLE001 the dispatcher makes it in the task instead, and says why
            self.error = str(exc)
        finally:
            self._made(slot)

    def _made(self, slot: Slot) -> None:
        with self._lock:
            self._making.discard(slot.name)
        self.on_ready()

    def wait(self) -> None:
        """At the dispatch's end: a slot still being made is wanted by no task any
        more; its checkout is stopped and the half-made folder discarded (at 50k
        files the checkout can take longer than the run's last tasks). A run ends
        with no git of its own left running."""
        self._stop_making.set()
        for thread in self._threads:
            thread.join()

    def acquire(self, task: str, base: str) -> Acquired:
        """The slot for `task` (its own if it holds one), recorded, then made to exist."""
        with self._lock, self.store.lock:
            ts = self.state.record(task)
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
                self.store.record(self.state, ev.SlotAdded(slot), later=True)
            was_clean = slot.clean
            # from now on it may hold the task's uncommitted work
            self.store.record(self.state, ev.SlotTaken(slot.name, task, dirty=True))
        path = Path(slot.path)
        created = False
        broken = worktrees.usable(self.repo, path)
        if broken is not None:
            aside = worktrees.set_aside(path)
            said = f"slot {slot.name} was unusable ({broken}); its files are in {aside}"
            self.store.record(self.state, ev.Warned(task, said), later=True)
        if not worktrees.is_worktree(path):
            self.store.record(self.state, ev.SlotSetUp(slot.name, False), later=True)
            worktrees.add(self.repo, path, base)
            created = True
        return Acquired(slot, created=created, clean=created or was_clean)

    def mark_setup(self, slot: Slot) -> None:
        # Not saved on its own: losing it to a crash only runs the setup once more.
        self.store.record(self.state, ev.SlotSetUp(slot.name, True), later=True)

    def release(self, task: str) -> None:
        """Give the merged task's slot back to the pool. Its work is committed and
        merged, so the slot is clean by construction: the next task skips the look.
        Saved with the task's final state, not on its own."""
        ts = self.state.record(task)
        slot = self.state.slots.get(ts.slot or "")
        if slot is not None and slot.task == task:
            # Let go of the branch while the slot is still the task's: once it is
            # marked free, the next task may be checking out its own branch there.
            worktrees.detach(self.repo, Path(slot.path))
        with self._lock, self.store.lock:
            held = slot is not None and slot.task == task
            freed = ev.SlotFreed(slot.name if held and slot else None, True, task)
            self.store.record(self.state, freed, later=True)

    def free_merged(self) -> None:
        """Slots still held by merged tasks (a run killed before it released them)."""
        for slot in self.state.slots.values():
            owner = self.state.tasks.get(slot.task or "")
            if slot.task is not None and (owner is None or owner.status == Status.MERGED):
                freed = ev.SlotFreed(slot.name, None, None if owner is None else owner.id)
                self.store.record(self.state, freed, later=True)


@frozen
class Acquired:
    slot: Slot
    created: bool  # just added: its setup has not run
    clean: bool  # known to hold no uncommitted work: no need to look


def _order(slot: Slot) -> tuple[int, str]:
    tail = slot.name.rpartition("-")[2]
    return (int(tail) if tail.isdigit() else 1 << 30, slot.name)
