"""A plan's run state on disk, and its one writer.

Written on every change and always *before* the action it records, so a `kill -9`
leaves a state the next run resumes from. On disk: a snapshot (state.json, replaced
atomically) and the journal of events since (state-journal-<id>.jsonl, one event a
line: its `kind` and its fields, written by `journal_line` and read back by
`event_of`; JSON stops here, the events are typed). Reading is the snapshot with the
journal's events applied over it (forge/run/state/reducer.py); `Tail` reads it as it grows. The journal is folded into a new
snapshot when it grows long, or when a writer asks for one (`save`). A
half-written last line was never acted on: reading stops there. A journal of
earlier forges (a task's whole record a line) reads as well: each line as the typed
events that leave the same state."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from forge.base import seal
from forge.base.files import JsonObject, StateDir, read_json, write_json
from forge.base.liveness import Owner
from forge.errors import StateError
from forge.git.refs import integration_ref
from forge.run.state import events, reducer
from forge.run.state.events import Event
from forge.run.state.gate_record import GateRecord
from forge.run.state.gate_story import GateLast, GateStep, PreExisting
from forge.run.state.records import Failure, FeedbackSource, Review, VerifiedBy
from forge.run.state.run_state import (
    Attempt,
    RunState,
    Slot,
    Stall,
    Status,
    TaskState,
    attempt_dict,
    state_problem,
)
from forge.verify.records import VerifyRecord

JOURNAL_PREFIX = "state-journal-"


# -- an event as a line of the journal ----------------------------------------------

KINDS: dict[str, type[Event]] = {cls.__name__: cls for cls in Event.__subclasses__()}

# The records a field's value is written as (`to_dict`); a tuple is written as a
# list of its items, and the rest are JSON already.
_RECORDS = (
    Review,
    VerifiedBy,
    Failure,
    GateStep,
    GateLast,
    PreExisting,
    Owner,
    GateRecord,
    TaskState,
    RunState,
)

_SCALARS = (str, int, float)


def _encode(value: object) -> object:
    if value is None or isinstance(value, _SCALARS):
        return value  # JSON already (a Status, a Stall: strings)
    if isinstance(value, Attempt):
        return attempt_dict(value)
    if isinstance(value, VerifyRecord):
        return seal.sealed(value.to_dict())
    if isinstance(value, Slot):
        return dict(vars(value))
    if isinstance(value, FeedbackSource):
        return str(value)
    if isinstance(value, _RECORDS):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value  # JSON already


def _object(value: object) -> JsonObject:
    if not isinstance(value, dict):
        raise TypeError(f"{value!r} is not an object")
    return value


def _items(value: object) -> list[object]:
    if not isinstance(value, list):
        raise TypeError(f"{value!r} is not a list")
    return value


# How a field's value is read back, by the field's name (a list: as a tuple).
_DECODE: dict[str, Callable[[object], object]] = {
    "record": lambda a: Attempt.from_dict(_object(a)),
    "landing": lambda a: Attempt.from_dict(_object(a)),
    "runner": lambda o: Owner.from_dict(_object(o)),
    "verification": lambda v: VerifyRecord.from_dict(_object(v)) if v else None,
    "gate": lambda g: GateRecord.from_dict(_object(g)) if g else None,
    "source": FeedbackSource.parse,
    "review": Review.parse,
    "verified_by": VerifiedBy.parse,
    "failures": lambda fs: tuple(Failure.from_dict(_object(f)) for f in _items(fs)),
    "step": lambda s: GateStep.from_dict(_object(s)),
    "last": GateLast.parse,
    "pre_existing": PreExisting.parse,
    "status": lambda s: Status(str(s)),
    "stall": lambda s: Stall(str(s)) if s else None,
    "slot": lambda s: Slot(**_object(s)) if isinstance(s, dict) else s,
    "state": lambda t: TaskState.from_dict(_object(t)),
    "wide": lambda w: RunState.from_dict(_object(w)),
}


def journal_line(event: Event) -> JsonObject:
    """The event as a line of the journal: its `kind` and its fields."""
    out: JsonObject = {"kind": type(event).__name__}
    for f in fields(event):
        out[f.name] = _encode(getattr(event, f.name))
    return out


def event_of(data: JsonObject) -> Event:
    """An event read back from its line. Raises KeyError, TypeError or ValueError
    on a line of another shape."""
    cls = KINDS[data["kind"]]
    kwargs: dict[str, object] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        decode = _DECODE.get(f.name)
        if decode is not None and value is not None:
            value = decode(value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    if cls is events.VerificationRecorded:
        verification = data.get("verification")
        kwargs["sealed"] = not verification or seal.valid(verification)
    return cls(**kwargs)


def read_line(st: RunState, entry: object) -> list[Event]:
    """The events of a journal line read over `st`: the one it holds, or those of an
    earlier forge's line (its task's whole record and the plan-wide part). Raises
    KeyError, TypeError or ValueError on a line of another shape."""
    data = _object(entry)
    if "kind" in data:
        return [event_of(data)]
    task, record, wide = data.get("task"), data.get("data"), _object(data["plan_wide"])
    edge = {"plan": st.plan, "integration": st.integration}
    why = state_problem({**edge, "tasks": {} if task is None else {task: record}})
    why = why or state_problem({**edge, "tasks": {}, **wide})
    if why:
        raise ValueError(why)
    said: list[Event] = []
    if task is not None and record is not None:
        said.append(events.TaskReplaced(str(task), TaskState.from_dict(_object(record))))
    names = [name for name in wide if name in _PLAN_WIDE]
    if "verification" in wide:
        names.append("verification_sealed")
    said.append(events.PlanWideReplaced(RunState.from_dict({**edge, **wide}), tuple(names)))
    return said


# What an earlier forge's journal line held besides its task's record.
_PLAN_WIDE = frozenset(
    {"slots", "verification", "paused", "gate", "gate_steps", "gate_last", "pre_existing"}
    | {"started", "finished", "wall_seconds", "invocations", "touched"}
)


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
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise StateError(
                f"plan state {path} has a journal line of an unexpected shape ({exc!r}); "
                "move it aside and run `forge plan` again to start from a fresh record"
            ) from None


def read_state(path: Path) -> JsonObject:
    """The state as data: the snapshot with its journal replayed over it (the
    snapshot alone when it is of a shape this forge does not read)."""
    data, lines = _parts(path)
    snapshot = _object(data)
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
        if why or not isinstance(data, dict):
            raise StateError(
                f"plan state {self.path} has an unexpected shape ({why}); move it aside "
                f"and run `forge plan` again to start from a fresh record"
            )
        st = RunState.from_dict(data)
        _replay(st, lines, self.path)
        return st

    def apply(self, st: RunState, event: Event) -> None:
        """Apply `event` to the state now; it is journaled with the next `emit` (a
        change nothing acts on before then, such as a phase's start)."""
        with self._lock:
            self._pending.append(json.dumps(journal_line(event), separators=(",", ":")))
            reducer.apply(st, event)

    def emit(self, st: RunState, *said: Event) -> None:
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
