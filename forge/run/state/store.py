"""A plan's run state on disk, and its one writer.

Written on every change and always *before* the action it records, so a `kill -9`
leaves a state the next run resumes from. On disk: a snapshot (state.json, replaced
atomically) and the journal of events since (state-journal-<id>.jsonl, one event a
line, written and read back by the versioned codec of forge/run/state/codec.py;
JSON stops there, the events are typed). `StateStore.record` is the one way a
plan's state changes: the only caller of the reducer (forge/run/state/reducer.py).
Reading is the snapshot with the journal's events applied over it; `Tail` reads it
as it grows. The journal is folded into a new snapshot when it grows long, or when
a writer asks for one (`save`). A half-written last line was never acted on:
reading stops there; a line of a newer forge is refused."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

from forge.base.files import JsonObject, StateDir, read_json, write_json
from forge.errors import StateError
from forge.git.refs import integration_ref
from forge.run.state import events, reducer
from forge.run.state.codec import NewerLine, journal_line, read_line
from forge.run.state.events import Event
from forge.run.state.run_state import Attempt, RunState, state_problem

JOURNAL_PREFIX = "state-journal-"


# -- the snapshot and its journal on disk -------------------------------------------


def _parts(path: Path) -> tuple[object, list[bytes]]:
    """The snapshot as data, and the lines of its journal."""
    data: object = read_json(path, what="plan state")
    if not isinstance(data, dict):
        return data, []  # a wrong shape: the caller names it
    journal = data.pop("journal", None)
    if not journal:
        return data, []
    try:
        with open(path.with_name(f"{JOURNAL_PREFIX}{journal}.jsonl"), "rb") as fh:
            return data, fh.read().split(b"\n")
    except FileNotFoundError:
        return data, []  # nothing changed since the snapshot


def _replay(st: RunState, lines: list[bytes], path: Path) -> None:
    for line in lines:
        try:
            entry: object = json.loads(line)
        except (ValueError, RecursionError):
            break  # the end, or a line a killed writer left half-written
        try:
            for event in read_line(st, entry):
                reducer.apply(st, event)
        except NewerLine:
            raise StateError(f"plan state {path} was written by a newer forge: upgrade") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise StateError(
                f"plan state {path} has a journal line of an unexpected shape ({exc!r}); "
                "move it aside and run `forge plan` again to start from a fresh record"
            ) from None


def read_state(path: Path) -> JsonObject:
    """The state as data: the snapshot with its journal replayed over it (the
    snapshot alone when it is of a shape this forge does not read)."""
    data, lines = _parts(path)
    if not isinstance(data, dict):
        raise TypeError(f"{data!r} is not an object")
    snapshot: JsonObject = data
    if not lines or state_problem(snapshot):
        return snapshot
    st = RunState.from_dict(snapshot)
    _replay(st, lines, path)
    return st.to_dict()


class Tail:
    """The state as a run writes it, read by following: the snapshot once, then only
    the lines its journal gained since the last `read`; the new snapshot again once
    the journal was folded into one (a new file: another inode). Only whole lines
    are read, so a line being written is read at the next look."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: RunState | None = None
        self._snapshot: tuple[int, int, int] | None = None
        self._journal: Path | None = None
        self._offset = 0

    def read(self) -> RunState | None:
        """The state now (None: no state recorded); StateError as `StateStore` reads."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.state, self._snapshot = None, None
            return None
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != self._snapshot or self.state is None:
            self._snapshot = None  # (read again from the start, should this fail)
            self._whole()
            self._snapshot = key
        else:
            self._more(self.state)
        return self.state

    def _whole(self) -> None:
        data: object = read_json(self.path, what="plan state")
        why = state_problem(data)
        if why or not isinstance(data, dict):
            raise StateError(f"plan state {self.path} has an unexpected shape ({why})")
        journal = data.pop("journal", None)
        state = RunState.from_dict(data)
        self._journal = self.path.with_name(f"{JOURNAL_PREFIX}{journal}.jsonl") if journal else None
        self._offset = 0
        self._more(state)
        self.state = state

    def _more(self, st: RunState) -> None:
        if self._journal is None:
            return
        try:
            with open(self._journal, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return  # folded into a new snapshot since: the next look reads that one
        end = chunk.rfind(b"\n")
        if end >= 0:
            _replay(st, chunk[:end].split(b"\n"), self.path)
            self._offset += end + 1


class StateStore:
    """The one writer of a plan's state; every write is atomic and serialised."""

    def __init__(self, state_dir: StateDir, plan: str) -> None:
        self.path: Path = state_dir.state_file(plan)
        self.plan = plan
        self._lock = threading.RLock()
        self._journal: Path | None = None  # the journal of the snapshot this store wrote
        self._lines = 0
        self._pending: list[str] = []  # applied, journaled with the next write

    def load(self, task_ids: list[str]) -> RunState:
        """The saved state, or a fresh one; tasks added to the plan since start PENDING."""
        try:
            st = self._read()
        except FileNotFoundError:
            st = RunState(plan=self.plan, integration=integration_ref(self.plan), tasks={})
        # Plan order, so every table lists tasks as the plan does.
        order = {tid: i for i, tid in enumerate(task_ids)}
        every = [*st.tasks, *(tid for tid in task_ids if tid not in st.tasks)]
        every.sort(key=lambda tid: order.get(tid, len(order)))
        reducer.apply(st, events.TasksKept(tuple(every)))  # (not journaled: each load keeps them)
        return st

    def load_existing(self) -> RunState | None:
        try:
            return self._read()
        except FileNotFoundError:
            return None

    def _read(self) -> RunState:
        data, lines = _parts(self.path)
        why = state_problem(data)
        if why or not isinstance(data, dict):
            raise StateError(
                f"plan state {self.path} has an unexpected shape ({why}); move it aside "
                f"and run `forge plan` again to start from a fresh record"
            )
        st = RunState.from_dict(data)
        _replay(st, lines, self.path)
        return st

    def record(self, st: RunState, *said: Event, later: bool = False) -> None:
        """Apply what happened to the state and journal it, before the caller does
        what it records: the one way a plan's state changes. `later`: journaled with
        the next write instead (a change nothing acts on before then, such as a
        phase's start); a write journals those applied before it."""
        with self._lock:
            for event in said:
                self._pending.append(json.dumps(journal_line(event), separators=(",", ":")))
                reducer.apply(st, event)
            if later:
                return
            if self._journal is None or self._lines >= max(256, 2 * len(st.tasks)):
                self._snapshot(st)
                return
            lines, self._pending = self._pending, []
            if lines:
                with open(self._journal, "a", encoding="utf-8") as fh:
                    fh.write("\n".join(lines) + "\n")
                self._lines += len(lines)

    def save(self, st: RunState) -> None:
        """Fold the state into a new snapshot (after a change of the whole plan, or
        of a state no run is writing)."""
        with self._lock:
            self._snapshot(st)

    def _snapshot(self, st: RunState) -> None:
        # A fresh journal id each time: a journal left by a killed writer can never
        # be mistaken for the new snapshot's.
        journal = os.urandom(6).hex()  # (not `secrets`: its import costs `forge status`)
        write_json(self.path, {**st.to_dict(), "journal": journal}, compact=True)
        self._journal = self.path.with_name(f"{JOURNAL_PREFIX}{journal}.jsonl")
        self._lines = 0
        self._pending = []
        for old in self.path.parent.glob(f"{JOURNAL_PREFIX}*.jsonl"):
            if old != self._journal:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(old)

    @property
    def lock(self) -> threading.RLock:
        return self._lock


def record_attempt(attempt: Attempt, *said: Event) -> None:
    """Apply what happened to an attempt kept outside any plan's state (a cluster
    worker's, a planner's, a judge's): it travels, or is kept, as a whole record."""
    for event in said:
        reducer.apply_attempt(attempt, event)
