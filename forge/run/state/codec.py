"""An event as a line of the run journal, and back: the journal's codec.

A line is a JSON object: the codec's version (`v`), the event's `kind` and its
fields. A line without a version is read as version 1 (the lines of forges before
the version was written); a line of a later version was written by a newer forge
and is refused (`NewerLine`), never guessed at. The kinds are the registry `KINDS`,
listed here by hand: a kind added or removed is an edit here and in the test that
freezes the list (tests/run/state/test_codec.py). A field's value is read back by
the field's declared type (a record by its own reader, a tuple item by item, a
scalar checked), not by its name. A line of an earlier forge's journal (a task's
whole record a line) reads as the typed events that leave the same state."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import fields
from enum import Enum
from typing import Union, get_args, get_origin, get_type_hints

from forge.base import seal
from forge.base.files import JsonObject
from forge.base.liveness import Owner
from forge.run.state import events as ev
from forge.run.state.events import Event
from forge.run.state.gate_record import GateRecord
from forge.run.state.gate_story import GateLast, GateStep, PreExisting
from forge.run.state.records import Failure, FeedbackSource, Review, VerifiedBy
from forge.run.state.run_state import (
    Attempt,
    RunState,
    Slot,
    TaskState,
    attempt_dict,
    state_problem,
)
from forge.verify.records import VerifyRecord

VERSION = 1  # the version of the lines this forge writes

# Every kind of event a journal line may hold, by name (the name is the line's `kind`).
KINDS: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (
        ev.AttemptStarted,
        ev.Pinned,
        ev.PhaseStarted,
        ev.PhaseEnded,
        ev.ProcessGroup,
        ev.FeedbackNoted,
        ev.Committed,
        ev.AttemptUsage,
        ev.ModelsReported,
        ev.Reviewed,
        ev.RanIn,
        ev.AttemptEnded,
        ev.Merged,
        ev.Failed,
        ev.GivenBack,
        ev.BlameDoubted,
        ev.BlamesSettled,
        ev.StepCleared,
        ev.Interrupted,
        ev.Blocked,
        ev.Unblocked,
        ev.Reopened,
        ev.Rebased,
        ev.Advised,
        ev.AgentSet,
        ev.Warned,
        ev.Salvaged,
        ev.CandidateAdded,
        ev.CandidatesRunning,
        ev.Queued,
        ev.Outrun,
        ev.Concluded,
        ev.SlotAdded,
        ev.SlotRemoved,
        ev.SlotTaken,
        ev.SlotSetUp,
        ev.SlotFreed,
        ev.SlotMeasured,
        ev.RunStarted,
        ev.RunFinished,
        ev.Touched,
        ev.Paused,
        ev.VerificationRecorded,
        ev.GateRecorded,
        ev.GateStepKept,
        ev.GateLastRecorded,
        ev.PreExistingRecorded,
        ev.TasksKept,
        ev.TaskReplaced,
        ev.PlanWideReplaced,
    )
}


class NewerLine(ValueError):
    """A journal line of a version this forge does not know: a newer forge wrote it."""


def _object(value: object) -> JsonObject:
    if not isinstance(value, dict):
        raise TypeError(f"{value!r} is not an object")
    return value


def _items(value: object) -> list[object]:
    if not isinstance(value, list):
        raise TypeError(f"{value!r} is not a list")
    return value


# -- writing -------------------------------------------------------------------------

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


def _encode(value: object) -> object:
    if value is None or isinstance(value, str | int | float):
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
    raise TypeError(f"no line for {value!r}")


def journal_line(event: Event) -> JsonObject:
    """The event as a line of the journal: the version, its `kind` and its fields."""
    out: JsonObject = {"v": VERSION, "kind": type(event).__name__}
    for f in fields(event):
        out[f.name] = _encode(getattr(event, f.name))
    return out


# -- reading, by the declared types ------------------------------------------------


def _required(value: object) -> object:
    if value is None:
        raise ValueError("an unreadable record")
    return value


# How a record is read back from its JSON.
_READERS: dict[type, Callable[[object], object]] = {
    Attempt: lambda a: Attempt.from_dict(_object(a)),
    Owner: lambda o: Owner.from_dict(_object(o)),
    VerifyRecord: lambda v: VerifyRecord.from_dict(_object(v)),
    GateRecord: lambda g: GateRecord.from_dict(_object(g)),
    FeedbackSource: lambda s: _required(FeedbackSource.parse(s)),
    Review: lambda r: _required(Review.parse(r)),
    VerifiedBy: lambda v: _required(VerifiedBy.parse(v)),
    Failure: lambda f: Failure.from_dict(_object(f)),
    GateStep: lambda s: GateStep.from_dict(_object(s)),
    GateLast: lambda g: _required(GateLast.parse(g)),
    PreExisting: lambda p: _required(PreExisting.parse(p)),
    Slot: lambda s: Slot(**_object(s)),
    TaskState: lambda t: TaskState.from_dict(_object(t)),
    RunState: lambda w: RunState.from_dict(_object(w)),
}


def _scalar(kind: type, value: object) -> object:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise TypeError(f"{value!r} is not a {kind.__name__}")
    return value


def _decode(kind: object, value: object) -> object:
    """`value` read back as the declared type `kind`."""
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        inner = [a for a in get_args(kind) if a is not type(None)]
        # (an empty record or enum stood for none in the lines of earlier forges)
        if value is None or (value in ("", {}) and inner[0] not in (str, bool, int, float)):
            return None
        return _decode(inner[0], value)
    if origin is tuple:
        item = get_args(kind)[0]
        return tuple(_decode(item, v) for v in _items(value))
    if kind in (str, int, float, bool):
        assert isinstance(kind, type)
        return _scalar(kind, value)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(value)
    if isinstance(kind, type) and kind in _READERS:
        return _READERS[kind](value)
    raise TypeError(f"no reader for {kind!r}")


_HINTS: dict[type[Event], dict[str, object]] = {}


def _hints(cls: type[Event]) -> dict[str, object]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def event_of(data: JsonObject) -> Event:
    """An event read back from its line. Raises NewerLine on a line of a newer
    forge, and KeyError, TypeError or ValueError on a line of another shape."""
    version = data.get("v", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"a line of version {version!r}")
    if version > VERSION:
        raise NewerLine(f"a line of version {version} (this forge reads {VERSION})")
    cls = KINDS[data["kind"]]
    hints = _hints(cls)
    kwargs: dict[str, object] = {}
    for f in fields(cls):
        if f.name in data:
            kwargs[f.name] = _decode(hints[f.name], data[f.name])
    if cls is ev.VerificationRecorded:
        verification = data.get("verification")
        kwargs["sealed"] = not verification or seal.valid(verification)
    return cls(**kwargs)


def read_line(st: RunState, entry: object) -> list[Event]:
    """The events of a journal line read over `st`: the one it holds, or those of an
    earlier forge's line (its task's whole record and the plan-wide part). Raises
    NewerLine, KeyError, TypeError or ValueError as `event_of`."""
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
        said.append(ev.TaskReplaced(str(task), TaskState.from_dict(_object(record))))
    names = [name for name in wide if name in _PLAN_WIDE]
    if "verification" in wide:
        names.append("verification_sealed")
    said.append(ev.PlanWideReplaced(RunState.from_dict({**edge, **wide}), tuple(names)))
    return said


# What an earlier forge's journal line held besides its task's record.
_PLAN_WIDE = frozenset(
    {"slots", "verification", "paused", "gate", "gate_steps", "gate_last", "pre_existing"}
    | {"started", "finished", "wall_seconds", "invocations", "touched"}
)
