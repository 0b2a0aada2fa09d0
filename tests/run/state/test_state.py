"""The run state on disk: typed in memory, the same JSON on disk, old files still read."""

from __future__ import annotations

import json
from pathlib import Path

from forge.base.files import StateDir
from forge.base.liveness import Owner
from forge.run.state.run_state import RunState
from forge.run.state.store import StateStore
from forge.verify.records import Verdict, VerifyRecord

OLD = {
    "schema_version": 1,
    "plan": "p",
    "integration": "refs/heads/forge/p-integration",
    "tasks": {
        "a": {
            "id": "a",
            "status": "RUNNING",
            "runner": {"pid": 123, "start": 456, "host": "h", "command": "forge run"},
            "attempts": [{"number": 1, "agent": "run", "status": "RUNNING"}],
        }
    },
    # an older forge wrote only what it knew
    "verification": {"verdict": "PASS", "commit": "c0ffee", "lanes": {}},
}


def test_an_old_state_file_reads_into_typed_records(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps(OLD))
    st = store.load_existing()
    assert st is not None and st.verification is not None
    assert (st.verification.verdict, st.verification.commit) == (Verdict.PASS, "c0ffee")
    runner = st.tasks["a"].runner
    assert runner is not None and (runner.pid, runner.start, runner.host) == (123, 456, "h")


def test_the_json_keeps_its_shape(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps(OLD))
    st = store.load_existing()
    assert st is not None
    store.save(st)
    data = json.loads(store.path.read_text())
    assert data["tasks"]["a"]["runner"] == OLD["tasks"]["a"]["runner"]  # type: ignore[index]
    assert data["verification"]["verdict"] == "PASS"
    assert data["verification"]["commit"] == "c0ffee"
    again = RunState.from_dict(data)
    assert again.verification == st.verification
    assert isinstance(again.verification, VerifyRecord)


def test_an_old_attempt_says_its_stall_only_in_its_reason() -> None:
    from forge.run.state.run_state import Attempt, Stall

    def old(reason: str, status: str = "FAILED") -> Attempt:
        return Attempt.from_dict({"number": 1, "agent": "x", "status": status, "reason": reason})

    assert old("no progress: the same change").stall == Stall.NO_PROGRESS
    assert old("no changes").stall == Stall.NO_CHANGES
    assert old("check failed: no changes seen").stall is None
    assert old("no changes", status="MERGED").stall is None
    new = Attempt.from_dict(
        {"number": 1, "agent": "x", "status": "FAILED", "reason": "no changes", "stall": None}
    )
    assert new.stall is None  # written by a forge that records stalls: taken as written


def test_a_candidate_that_lost_is_a_fact_of_the_state_not_of_its_reason() -> None:
    from forge.commands.candidate_view import outcome
    from forge.run.state import events as ev
    from forge.run.state import records, reducer
    from forge.run.state.run_state import Attempt, Lost, Status, TaskState

    def old(reason: str, status: str) -> Attempt:
        return Attempt.from_dict({"number": 1, "agent": "x", "status": status, "reason": reason})

    # A state file from before `lost` says it only in the reason.
    assert old("stopped: lost to codex", "INTERRUPTED").lost == Lost.STOPPED
    assert old("passed, not chosen", "FAILED").lost == Lost.NOT_CHOSEN
    assert old("stopped by the user", "INTERRUPTED").lost is None
    # Now the events say it, and the view reads that, whatever the reason's words.
    st = RunState(plan="p", integration="refs/heads/x", tasks={"a": TaskState(id="a")})
    for unit in ("a+1", "a+2", "a+3"):
        reducer.apply(st, ev.CandidateAdded("a", unit, unit))
        reducer.apply(st, ev.AttemptStarted(unit, Attempt(number=1, agent="x"), Owner.me()))
    reducer.apply(st, ev.AttemptEnded("a+1", Status.INTERRUPTED, "stopped by the user"))
    reducer.apply(st, ev.Outrun("a+1", "stopped: lost to a+2"))
    selected = records.FeedbackSource(records.Source.SELECTION)
    reducer.apply(st, ev.Failed("a+2", Status.FAILED, "passed, not chosen", None, selected))
    reducer.apply(st, ev.Failed("a+3", Status.FAILED, "passed, not chosen", None, records.MERGED))
    cands = st.tasks["a"].candidates
    assert [c.last.lost for c in cands.values() if c.last] == [Lost.STOPPED, Lost.NOT_CHOSEN, None]
    assert outcome(st.tasks["a"], cands["a+1"]) == ("stopped", "lost to a+2")
    assert outcome(st.tasks["a"], cands["a+2"]) == ("passed", "not chosen")
    assert outcome(st.tasks["a"], cands["a+3"]) == ("failed", "passed, not chosen")


OLD_GATE = {
    "batch": ["a"],
    "head": "1" * 40,
    "phase": "verifying",
    "left": None,
    "chain": [["a", "2" * 40]],
    "landing": {
        "from": "1" * 40,
        "to": "2" * 40,
        "tasks": {"a": "2" * 40},
        "verified_by": {"record": "r", "commit": "2" * 40, "verdict": "PASS"},
        "verification": None,
    },
}


def test_the_gate_record_is_typed_and_an_old_one_still_reads(tmp_path: Path) -> None:
    store = StateStore(StateDir(tmp_path), "p")
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({**OLD, "gate": OLD_GATE}))
    st = store.load_existing()
    assert st is not None and st.gate is not None and st.gate.landing is not None
    assert (st.gate.phase, st.gate.chain) == ("verifying", [["a", "2" * 40]])
    assert st.gate.landing.head == "1" * 40  # what an older forge called "from"
    assert st.gate.landing.tasks == {"a": "2" * 40}
    store.save(st)
    again = store.load_existing()
    assert again is not None and again.gate == st.gate


def test_a_gate_record_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    from forge.errors import StateError

    store = StateStore(StateDir(tmp_path), "p")
    store.path.parent.mkdir(parents=True)
    bad = {**OLD_GATE, "landing": {"to": 7, "tasks": {}}}
    store.path.write_text(json.dumps({**OLD, "gate": bad}))
    try:
        store.load_existing()
    except StateError as exc:
        assert "`gate.landing.to` is the number 7" in str(exc)
    else:
        raise AssertionError("a bad gate record was read")


RECORDED_ATTEMPT = {
    "number": 2,
    "agent": "claude:opus",
    "status": "FAILED",
    "reason": "breaks verification: lane unit: tests/x.py::test_y (boom)",
    "feedback_source": "verify:unit",
    "review": {
        "agent": "rev",
        "verdict": "reject",
        "log": "/l/review.log",
        "cost_usd": 0.1,
        "input_tokens": 5,
        "output_tokens": 6,
        "findings": "no",
    },
    "phases": [
        {"name": "agent", "start": 1.0, "end": 2.5},
        {"name": "queue", "start": 2.5, "end": None},
    ],
    "failures": [{"lane": "unit", "test": "tests/x.py::test_y", "message": "boom"}],
}
RECORDED_GATE = {
    "gate_steps": [
        {
            "name": "the culprit's failing tests again",
            "start": 1.0,
            "end": 2.0,
            "verdict": "FAIL",
            "commit": "c",
            "record": "r",
            "tasks": ["a"],
            "runs": 1,
            "failures": [{"lane": "unit", "test": "t", "message": "m", "log": "/l"}],
            "logs": {"unit": "/l"},
            "run": 0,
        }
    ],
    "gate_last": {
        "verdict": "FAIL",
        "at": 3.0,
        "batch": ["a"],
        "step": "bisection",
        "commit": "c",
        "tasks": ["a"],
        "record": "r",
        "culprit": "a",
        "failures": [{"lane": "unit", "test": "t", "message": "m", "log": "/l"}],
    },
    "pre_existing": {
        "head": "h",
        "tests": [{"lane": "unit", "test": "t2"}],
        "fixed": [{"lane": "unit", "test": "t3", "by": ["a"]}],
    },
}


def test_typed_parts_of_the_state_are_written_back_as_they_were_read() -> None:
    """An attempt's feedback source, review, phases and failures, a task's verifying
    record and the gate's story are records in memory and the same JSON on disk."""
    from forge.run.state.gate_story import StepKind
    from forge.run.state.records import ReviewVerdict, Source

    verified = {"record": "r", "commit": "c", "verdict": "FLAKY", "flaky": ["t"]}
    task = {"id": "a", "status": "FAILED", "verified_by": verified, "attempts": [RECORDED_ATTEMPT]}
    data = {**OLD, "tasks": {"a": task}, **RECORDED_GATE}
    st = RunState.from_dict(json.loads(json.dumps(data)))
    ts = st.tasks["a"]
    last = ts.last
    assert last is not None and last.feedback_source is not None and last.review is not None
    assert (last.feedback_source.kind, last.feedback_source.lane) == (Source.VERIFY, "unit")
    assert last.review.verdict == ReviewVerdict.REJECT and last.phases[1].end is None
    assert ts.verified_by is not None and ts.verified_by.flaky == ["t"]
    assert st.gate_steps[0].kind == StepKind.SUBSET and st.gate_last is not None
    assert st.pre_existing is not None and st.pre_existing.fixed[0].by == ["a"]
    again = st.to_dict()
    saved = again["tasks"]["a"]
    assert {k: saved["attempts"][0][k] for k in RECORDED_ATTEMPT} == RECORDED_ATTEMPT
    assert saved["verified_by"] == verified
    assert {k: again[k] for k in RECORDED_GATE} == RECORDED_GATE
