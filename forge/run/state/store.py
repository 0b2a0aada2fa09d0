"""A plan's run state on disk, and its one writer.

Written on every change and always *before* the action it records, so a `kill -9`
leaves a state the next run resumes from. On disk: a snapshot (state.json, replaced
atomically) and the journal of events since (state-journal-<id>.jsonl, one event a
line, forge/run/state/events.py). Reading is the snapshot with the journal's events
applied over it (forge/run/state/reducer.py). The journal is folded into a new
snapshot when it grows long, or when a writer asks for one (`save`). A
half-written last line was never acted on: reading stops there. A journal of
earlier forges (a task's whole record a line) reads as well."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from forge.base.files import StateDir, read_json, write_json
from forge.errors import StateError
from forge.git.refs import integration_ref
from forge.run.state import events, reducer
from forge.run.state.run_state import RunState, state_problem

JOURNAL_PREFIX = "state-journal-"


def _parts(path: Path) -> tuple[Any, list[bytes]]:
    """The snapshot as data, and the lines of its journal."""
    data: Any = read_json(path, what="plan state")
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
            entry = json.loads(line)
        except (ValueError, RecursionError):
            break  # the end, or a line a killed writer left half-written
        try:
            event = events.from_dict(entry)
            if isinstance(event, events.Recorded):
                _check_recorded(st, event)
            reducer.apply(st, event)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise StateError(
                f"plan state {path} has a journal line of an unexpected shape ({exc!r}); "
                "move it aside and run `forge plan` again to start from a fresh record"
            ) from None


def _check_recorded(st: RunState, event: events.Recorded) -> None:
    tasks = {} if event.task is None else {event.task: event.data}
    why = state_problem({"plan": st.plan, "integration": st.integration, "tasks": tasks})
    wide = {"plan": st.plan, "integration": st.integration, "tasks": {}, **event.plan_wide}
    why = why or state_problem(wide)
    if why:
        raise ValueError(why)


def read_state(path: Path) -> Any:
    """The state as data: the snapshot with its journal replayed over it."""
    data, lines = _parts(path)
    if not lines or state_problem(data):
        return data
    st = RunState.from_dict(data)
    _replay(st, lines, path)
    return st.to_dict()


class StateStore:
    """The one writer of a plan's state; every write is atomic and serialised."""

    def __init__(self, state_dir: StateDir, plan: str) -> None:
        self.path: Path = state_dir.state_file(plan)
        self.plan = plan
        self._lock = threading.RLock()
        self._journal: Path | None = None  # the journal of the snapshot this store wrote
        self._lines = 0
        self._pending: list[str] = []  # applied, written with the next `emit`

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
        reducer.apply(st, events.TasksKept(tuple(every)))
        return st

    def load_existing(self) -> RunState | None:
        try:
            return self._read()
        except FileNotFoundError:
            return None

    def _read(self) -> RunState:
        data, lines = _parts(self.path)
        why = state_problem(data)
        if why:
            raise StateError(
                f"plan state {self.path} has an unexpected shape ({why}); move it aside "
                f"and run `forge plan` again to start from a fresh record"
            )
        st = RunState.from_dict(data)
        _replay(st, lines, self.path)
        return st

    def apply(self, st: RunState, event: events.Event) -> None:
        """Apply `event` to the state now; it is journaled with the next `emit` (a
        change nothing acts on before then, such as a phase's start)."""
        with self._lock:
            self._pending.append(json.dumps(events.to_dict(event), separators=(",", ":")))
            reducer.apply(st, event)

    def emit(self, st: RunState, *said: events.Event) -> None:
        """Apply the events and journal them (with those applied before), before the
        caller does what they record."""
        with self._lock:
            for event in said:
                self.apply(st, event)
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
