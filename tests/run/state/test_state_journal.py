"""The run state on disk: a snapshot plus a journal of typed events. Events read
back (the state replayed equals the state written), a half-written last event
ignored, old single-file state and old journal lines (a task's whole record a line)
read (as typed events), the journal folded into a new snapshot once it is long,
an attempt's INFRA kind kept (the codec itself: test_codec.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge.base.files import StateDir
from forge.base.liveness import Owner
from forge.errors import StateError
from forge.run.state import events as ev
from forge.run.state.codec import read_line
from forge.run.state.gate_story import (
    GateLast,
)
from forge.run.state.records import (
    FeedbackSource,
    Phase,
)
from forge.run.state.reducer import apply
from forge.run.state.run_state import Attempt, RunState, Slot, Stall, Status, TaskState
from forge.run.state.store import JOURNAL_PREFIX, StateStore, read_state


def _state(n: int) -> RunState:
    tasks = {f"t{i}": TaskState(id=f"t{i}") for i in range(n)}
    return RunState(plan="p", integration="refs/heads/forge/p-integration", tasks=tasks)


def _journals(store: StateStore) -> list[Path]:
    return sorted(store.path.parent.glob(f"{JOURNAL_PREFIX}*.jsonl"))


def _back(tmp_path: Path) -> RunState:
    back = StateStore(StateDir(tmp_path), "p").load_existing()
    assert back is not None
    return back


def test_events_are_journal_lines_read_back_whole(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(3)
    store.save(st)
    snapshot = store.path.read_bytes()
    store.record(st, ev.AttemptStarted("t1", Attempt(number=1, agent="run"), Owner.me()))
    store.record(
        st, ev.PhaseStarted("t1", 1, "run", 1.0), later=True
    )  # journaled with the next write
    store.record(st, ev.PhaseEnded("t1", 1, 2.0, "run"), later=True)
    store.record(
        st,
        ev.Committed("t1", 1, "c0ffee", "hash"),
        ev.AttemptEnded("t1", Status.FAILED, "boom", Stall.NO_PROGRESS, 2.5),
        ev.Paused("hold: test"),
        ev.SlotAdded(Slot(name="slot-1", path="/x")),
        ev.SlotTaken("slot-1", "t1"),
    )
    assert store.path.read_bytes() == snapshot  # the snapshot is not rewritten
    [journal] = _journals(store)
    kinds = [json.loads(line)["kind"] for line in journal.read_text().splitlines()]
    assert kinds[:3] == ["AttemptStarted", "PhaseStarted", "PhaseEnded"]
    back = _back(tmp_path)
    assert back.to_dict() == st.to_dict()
    t1 = back.tasks["t1"]
    assert (t1.status, t1.reason, t1.slot) == (Status.FAILED, "boom", "slot-1")
    assert t1.attempts[0].phases == [Phase("run", 1.0, 2.0)]
    assert back.paused == "hold: test" and back.tasks["t0"].status == Status.PENDING


def test_a_half_written_event_is_ignored(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(2)
    store.save(st)
    store.record(st, ev.Blocked("t0", "dependency"))
    [journal] = _journals(store)
    with journal.open("a") as fh:  # what a writer killed mid-line leaves
        fh.write('{"kind":"Merged","task":"t1","commit":"ab')
    back = _back(tmp_path)
    assert back.tasks["t0"].status == Status.BLOCKED and back.tasks["t1"].status == Status.PENDING


def test_an_event_of_another_shape_is_a_state_error(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(1)
    store.save(st)
    store.record(st, ev.Blocked("t0", "dependency"))
    [journal] = _journals(store)
    with journal.open("a") as fh:
        fh.write('{"kind":"NoSuchEvent","task":"t0"}\n')
    with pytest.raises(StateError, match="journal line of an unexpected shape"):
        StateStore(StateDir(tmp_path), "p").load_existing()


def test_old_single_file_state_is_read(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    data = _state(2).to_dict()
    data["tasks"]["t1"]["status"] = "MERGED"
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps(data))  # no journal id: what forge wrote before
    back = store.load_existing()
    assert back is not None and back.tasks["t1"].status == Status.MERGED


def test_old_journal_lines_are_read(tmp_path: Path) -> None:
    """A journal an earlier forge wrote: each line one task's whole record and the
    plan-wide part."""
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(2)
    store.save(st)
    journal = json.loads(store.path.read_text())["journal"]
    old = _state(2)
    old.tasks["t1"].status, old.tasks["t1"].reason = Status.FAILED, "boom"
    old.paused = "hold: old"
    line = {"task": "t1", "data": old.tasks["t1"].to_dict(), "plan_wide": old.plan_wide()}
    path = store.path.with_name(f"{JOURNAL_PREFIX}{journal}.jsonl")
    path.write_text(json.dumps(line) + "\n" + '{"task":"t0","data":{"id":"t0","sta')
    back = _back(tmp_path)
    assert (back.tasks["t1"].status, back.tasks["t1"].reason) == (Status.FAILED, "boom")
    assert back.paused == "hold: old" and back.tasks["t0"].status == Status.PENDING
    assert read_state(store.path)["tasks"]["t1"]["reason"] == "boom"


def test_an_old_line_reads_as_typed_events() -> None:
    """An old line of an earlier forge still: the plan-wide fields it holds replace
    the state's, those it does not (recorded only by later forges) stay."""
    last = GateLast("FAIL", 1.0, ["t0"], "batch", "c3", ["t0"], culprit="t0")
    st = RunState(
        plan="p",
        integration="refs/heads/forge/p-integration",
        tasks={"t0": TaskState(id="t0")},
        slots={"slot-1": Slot(name="slot-1", path="/x")},
        paused="hold: now",
        gate_last=last,
    )
    wide: dict[str, object] = {"slots": {}, "paused": None, "started": "2026-01-01T00:00:00"}
    reason = "quota: out of credit"
    attempt = Attempt(number=1, agent="a", status=Status.INFRA, reason=reason)
    data = TaskState(id="t1", status=Status.INFRA, reason=reason, attempts=[attempt]).to_dict()
    del data["attempts"][0]["infra_kind"]  # as a forge before the field wrote it
    said = read_line(st, {"task": "t1", "data": data, "plan_wide": wide})
    replaced, plan_wide = said
    assert isinstance(replaced, ev.TaskReplaced) and isinstance(plan_wide, ev.PlanWideReplaced)
    assert isinstance(replaced.state, TaskState) and replaced.state.status == Status.INFRA
    assert replaced.state.attempts[0].infra_kind == "quota"
    assert sorted(plan_wide.names) == ["paused", "slots", "started"]
    for event in said:
        apply(st, event)
    assert st.tasks["t1"].status == Status.INFRA and st.slots == {} and st.paused is None
    assert st.started == "2026-01-01T00:00:00" and st.gate_last == last
    with pytest.raises(ValueError, match="not one of"):
        read_line(st, {"task": "t1", "data": {"id": "t1", "status": "NOPE"}, "plan_wide": {}})


def test_an_attempt_keeps_the_infra_kind_it_ended_with(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(1)
    store.save(st)
    store.record(st, ev.AttemptStarted("t0", Attempt(number=1, agent="a"), Owner.me()))
    store.record(st, ev.AttemptEnded("t0", Status.INFRA, "review: x", None, 1.0, "rate-limit"))
    [attempt] = _back(tmp_path).tasks["t0"].attempts
    assert (attempt.status, attempt.infra_kind) == (Status.INFRA, "rate-limit")


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        ("INFRA", "quota: out of credit", "quota"),
        ("INFRA", "worker w1 lost mid-attempt: the attempt runs again elsewhere", None),
        ("FAILED", "check: exit 1", None),
    ],
)
def test_an_older_attempt_without_its_infra_kind_reads_it_from_its_reason(
    status: str, reason: str, kind: str | None
) -> None:
    data = {"number": 1, "agent": "a", "status": status, "reason": reason}
    assert Attempt.from_dict(data).infra_kind == kind
    assert Attempt.from_dict({**data, "infra_kind": None}).infra_kind is None


def test_the_journal_is_folded_into_a_snapshot(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(100)
    store.save(st)
    for i in range(256):
        store.record(st, ev.Blocked(f"t{i % 100}", f"reason {i}"))
    # 256 lines fill the journal; the next change writes a new snapshot instead
    store.record(st, ev.Reopened("t0", "again"))
    assert [p.stat().st_size for p in _journals(store)] in ([], [0])
    raw = json.loads(store.path.read_text())
    assert raw["tasks"]["t0"]["reason"] == "again" and raw["tasks"]["t99"]["status"] == "BLOCKED"
    assert _back(tmp_path).to_dict() == st.to_dict()


@pytest.mark.parametrize(
    "verdict",
    [
        ev.Merged("t0", "c1", "def", at=9.0),
        ev.Failed("t0", Status.CONFLICT, "paths", None, FeedbackSource.verify("unit"), at=9.0),
    ],
    ids=["Merged", "Failed"],
)
def test_a_verdict_ends_its_attempts_open_phases(tmp_path: Path, verdict: ev.Event) -> None:
    """The reducer draws the consequence: the open phases end when the verdict was
    given; read back from the journal alike. A verdict without a time leaves them."""
    store = StateStore(StateDir(tmp_path), "p")
    st = _state(1)
    store.save(st)
    store.record(st, ev.AttemptStarted("t0", Attempt(number=1, agent="a"), Owner.me()))
    store.record(st, ev.PhaseStarted("t0", 1, "gate", 1.0), ev.PhaseStarted("t0", 1, "queue", 2.0))
    store.record(st, ev.Merged("t0", "c0", "def"))
    assert [p.end for p in st.tasks["t0"].attempts[0].phases] == [None, None]
    store.record(st, verdict)
    assert [p.end for p in st.tasks["t0"].attempts[0].phases] == [9.0, 9.0]
    assert _back(tmp_path).to_dict() == st.to_dict()
