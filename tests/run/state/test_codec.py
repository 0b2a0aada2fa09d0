"""The journal's codec: every kind of event, generated from the registry, reads back
equal to what was written; the registry is frozen here (a kind added or removed is
an edit of `FROZEN`); each line carries its version, a line without one reads as
version 1, a journal an earlier forge wrote (tests/fixtures/journal-v1) reads to
the state it left, a line of a newer forge is refused in one line, and a value of
another type than its field's is a line of an unexpected shape."""

from __future__ import annotations

import json
import shutil
import types
from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import Union, get_args, get_origin, get_type_hints

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge.base.files import StateDir
from forge.base.liveness import Owner
from forge.errors import ExitCode, StateError
from forge.run.state import events as ev
from forge.run.state import reducer
from forge.run.state.codec import KINDS, VERSION, event_of, journal_line
from forge.run.state.gate_record import GateRecord
from forge.run.state.gate_story import (
    GateFailure,
    GateLast,
    GateStep,
    LaneTest,
    PreExisting,
    StepKind,
)
from forge.run.state.records import (
    Failure,
    FeedbackSource,
    Phase,
    Review,
    ReviewVerdict,
    VerifiedBy,
)
from forge.run.state.run_state import Attempt, RunState, Slot, TaskState
from forge.run.state.store import JOURNAL_PREFIX, StateStore, read_state
from forge.verify.records import Verdict, VerifyRecord

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "journal-v1"

# The kinds a journal line may hold: changing this list is a change of the codec.
FROZEN = [
    "AttemptStarted",
    "Pinned",
    "PhaseStarted",
    "PhaseEnded",
    "ProcessGroup",
    "FeedbackNoted",
    "Committed",
    "AttemptUsage",
    "ModelsReported",
    "Reviewed",
    "RanIn",
    "AttemptEnded",
    "Merged",
    "Failed",
    "GivenBack",
    "BlameDoubted",
    "BlamesSettled",
    "StepCleared",
    "Interrupted",
    "Blocked",
    "Unblocked",
    "Reopened",
    "Rebased",
    "Advised",
    "AgentSet",
    "Warned",
    "Salvaged",
    "CandidateAdded",
    "CandidatesRunning",
    "Queued",
    "Outrun",
    "Concluded",
    "SlotAdded",
    "SlotRemoved",
    "SlotTaken",
    "SlotSetUp",
    "SlotFreed",
    "SlotMeasured",
    "RunStarted",
    "RunFinished",
    "Touched",
    "Paused",
    "VerificationRecorded",
    "GateRecorded",
    "GateStepKept",
    "GateLastRecorded",
    "PreExistingRecorded",
    "TasksKept",
    "TaskReplaced",
    "PlanWideReplaced",
]


KEYS = (ev.TaskEvent, ev.AttemptEvent)  # what a kind's events are keyed by


def _kinds(cls: type[ev.Event]) -> set[type[ev.Event]]:
    subs = cls.__subclasses__()
    return {k for sub in subs for k in ({sub} | _kinds(sub))} - set(KEYS)


def test_the_registry_of_kinds_is_frozen() -> None:
    assert list(KINDS) == FROZEN
    assert set(KINDS.values()) == _kinds(ev.Event), "every event is a kind"


def test_the_reducer_finds_a_record_by_its_events_key() -> None:
    """An attempt's event changes an attempt, a task's its record, another the plan."""
    for kind in KINDS.values():
        if issubclass(kind, ev.AttemptEvent):
            assert kind in reducer._ATTEMPT, kind
        elif issubclass(kind, ev.TaskEvent):
            assert kind in reducer._TASK, kind
        else:
            assert kind in reducer._PLAN, kind


# -- every kind, generated -----------------------------------------------------------

# Records stand for themselves: a few of each, as a run writes them.
RECORDS: dict[type, list[object]] = {
    Attempt: [
        Attempt(number=1, agent="a:m", phases=[Phase("x", 0.0, 1.5)]),
        Attempt(number=2, agent="a", candidate="b", cost_usd=0.5, failures=[]),
    ],
    Owner: [
        Owner(pid=7, start=3, host="h", command="forge run"),
        Owner(pid=1, start=None, host=""),
    ],
    VerifyRecord: [
        VerifyRecord("id", "key", "c0", "tree", "cfg", Verdict.PASS, (), "2026-01-01", 1.0)
    ],
    GateRecord: [GateRecord(batch=["t"], head="h")],
    FeedbackSource: [FeedbackSource.verify("unit"), FeedbackSource.parse("check")],
    Review: [Review("r", ReviewVerdict.APPROVE, findings="ok")],
    VerifiedBy: [VerifiedBy("r1", "c1", "FAIL"), VerifiedBy("r2", "c2", "FLAKY", flaky=["x"])],
    Failure: [Failure.from_dict({"lane": "l", "test": "x"})],
    GateStep: [
        GateStep(StepKind.BATCH, "batch", 1.0, 2.0, "FAIL", failures=[GateFailure("l", "x")])
    ],
    GateLast: [GateLast("FAIL", 1.0, ["t"], "batch", "c3", ["t"], culprit="t")],
    PreExisting: [PreExisting("h", [LaneTest("l", "x")], [LaneTest("l", "y", ["t"])])],
    Slot: [Slot(name="slot-1", path="/x", clean=True), Slot(name="s", path="/y", task="t")],
    TaskState: [TaskState(id="t", attempts=[Attempt(number=1, agent="a")])],
    RunState: [RunState(plan="p", integration="i", tasks={}, paused="hold")],
}


def _values(kind: object) -> st.SearchStrategy[object]:
    """Values of the declared type `kind`."""
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        return st.one_of(*(_values(a) for a in get_args(kind)))
    if origin is tuple:
        return st.lists(_values(get_args(kind)[0]), max_size=3).map(tuple)
    scalars: dict[object, st.SearchStrategy[object]] = {
        type(None): st.none(),
        str: st.text(max_size=12),
        int: st.integers(-(2**53), 2**53),
        float: st.floats(allow_nan=False, allow_infinity=False),
        bool: st.booleans(),
    }
    if kind in scalars:
        return scalars[kind]
    if isinstance(kind, type) and issubclass(kind, Enum):
        return st.sampled_from(list(kind))
    assert isinstance(kind, type) and kind in RECORDS, f"no values of {kind!r}: add some"
    return st.sampled_from(RECORDS[kind])


def _events(cls: type[ev.Event]) -> st.SearchStrategy[ev.Event]:
    hints = get_type_hints(cls)
    given_fields = {f.name: _values(hints[f.name]) for f in fields(cls)}
    if cls is ev.VerificationRecorded:  # (`sealed` is read from the record's seal)
        given_fields["sealed"] = st.just(True)
    return st.builds(cls, **given_fields)


@pytest.mark.parametrize("cls", list(KINDS.values()), ids=list(KINDS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_kind_reads_back_equal(cls: type[ev.Event], data: st.DataObject) -> None:
    event = data.draw(_events(cls))
    line = json.loads(json.dumps(journal_line(event)))
    assert (line["v"], line["kind"]) == (VERSION, cls.__name__)
    assert event_of(line) == event


# -- versions --------------------------------------------------------------------------


def _journal(tmp_path: Path) -> tuple[StateStore, Path]:
    """A store of plan `p` with one task, its snapshot written; and its journal."""
    store = StateStore(StateDir(tmp_path), "p")
    state = store.load(["t0"])
    store.save(state)
    store.record(state, ev.Blocked("t0", "dependency"))
    [journal] = store.path.parent.glob(f"{JOURNAL_PREFIX}*.jsonl")
    return store, journal


def test_a_line_without_a_version_reads_as_version_1() -> None:
    line = {"kind": "Blocked", "task": "t", "reason": "why"}
    assert event_of(line) == ev.Blocked("t", "why") == event_of({**line, "v": 1})


def test_the_journal_an_earlier_forge_wrote_reads(tmp_path: Path) -> None:
    """Lines without a version (and one of a forge before the typed events: a task's
    whole record) read to the state that forge read from them."""
    store = StateStore(StateDir(tmp_path), "p")
    store.path.parent.mkdir(parents=True)
    for part in FIXTURE.iterdir():
        if part.name != "expected.json":
            shutil.copy(part, store.path.parent / part.name)
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert read_state(store.path) == expected
    back = store.load_existing()
    assert back is not None and back.to_dict() == expected
    store.record(back, ev.Unblocked("u"))  # and it goes on from there
    again = StateStore(StateDir(tmp_path), "p").load_existing()
    assert again is not None and again.to_dict() == back.to_dict()


def test_a_line_of_a_newer_forge_says_upgrade(tmp_path: Path) -> None:
    store, journal = _journal(tmp_path)
    with journal.open("a") as fh:
        fh.write(json.dumps({"v": VERSION + 1, "kind": "Blocked", "task": "t0"}) + "\n")
    with pytest.raises(StateError) as raised:
        StateStore(StateDir(tmp_path), "p").load_existing()
    assert str(raised.value) == f"plan state {store.path} was written by a newer forge: upgrade"
    assert raised.value.code == ExitCode.USAGE


@pytest.mark.parametrize(
    "line",
    [
        {"kind": "Blocked", "task": 5, "reason": "why"},
        {"kind": "SlotMeasured", "name": "s", "bytes": "many"},
        {"kind": "Touched", "touched": "a.txt"},
        {"kind": "Blocked", "task": "t0", "reason": "why", "v": "one"},
    ],
)
def test_a_value_of_another_type_is_a_line_of_another_shape(
    tmp_path: Path, line: dict[str, object]
) -> None:
    _store, journal = _journal(tmp_path)
    with journal.open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    with pytest.raises(StateError, match="journal line of an unexpected shape"):
        StateStore(StateDir(tmp_path), "p").load_existing()
