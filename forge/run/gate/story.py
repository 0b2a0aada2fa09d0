"""What the gate tells of its verifications, as records of the run state
(forge/run/state/gate_story.py).

gate_steps  every verification the gate ran in the last run (batch, bisection
            step, speculation): its verdict, candidate, tasks, failing tests
            and logs (the report lists them and draws them in its timeline)
gate_last   its last verification that did not land anything: INTERRUPTED
            (which batch, which step, which tasks stay QUEUED) or FAIL (the
            candidate, the culprit and the failing tests); `forge status`
            shows it beside the integration head's verdict
pre_existing  the tests the integration head fails already (`gate_on =
            "regressions"`: they blame nobody), and those landed work fixed
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from forge.run.context import RunContext
from forge.run.gate.bisection import Outcome
from forge.run.state import events as ev
from forge.run.state.gate_record import GatePhase
from forge.run.state.gate_story import (
    GateFailure,
    GateLast,
    GateStep,
    LaneTest,
    PreExisting,
    StepKind,
)
from forge.run.state.records import VerifiedBy, by_gate
from forge.run.state.run_state import RunState, Status
from forge.verify import flakes
from forge.verify.flakes import TestsOf
from forge.verify.records import LaneResult, Verdict, VerifyRecord, named_tests


def failures(record: VerifyRecord, tests_of: TestsOf) -> list[GateFailure]:
    """A failing lane's failing tests, one entry each; one entry with `test` empty
    when its log names none."""
    out = []
    for lane in record.lanes:
        if lane.verdict != Verdict.FAIL:
            continue
        last = lane.runs[-1] if lane.runs else None
        log = last.log if last else ""
        tests = sorted(tests_of(last)) if last else []
        said = {f.test: f.message for f in last.failures} if last else {}
        out += [GateFailure(lane.name, t, said.get(t, ""), log) for t in tests or [""]]
    return out


def step(
    kind: StepKind,
    started: float,
    record: VerifyRecord,
    *,
    name: str,
    tasks: Sequence[str],
    tests_of: TestsOf,
) -> GateStep:
    """One verification the gate ran."""
    return GateStep(
        kind=kind,
        name=name,
        start=round(started, 3),
        end=round(time.time(), 3),
        verdict=str(record.verdict),
        commit=record.commit,
        record=record.id,
        tasks=list(tasks),
        runs=sum(len(lane.runs) for lane in record.lanes),
        failures=failures(record, tests_of),
        logs={lane.name: lane.runs[-1].log for lane in record.lanes if lane.runs},
    )


def interrupted(batch: Sequence[str], steps: Sequence[GateStep], phase: str | None) -> GateLast:
    """The batch stopped while it was being verified: its tasks stay QUEUED."""
    stopped = [s for s in steps if s.verdict == Verdict.INTERRUPTED]
    # the batch's own step before a speculation stopped with it
    last = next((s for s in reversed(stopped) if s.kind != StepKind.SPECULATION), None)
    last = last or (stopped[-1] if stopped else None)
    name = "bisection" if phase == GatePhase.BISECTING else "batch"
    return GateLast(
        verdict=str(Verdict.INTERRUPTED),
        at=round(time.time(), 3),
        batch=list(batch),
        step=last.name if last else name,
        commit=last.commit if last else None,
        tasks=list(last.tasks) if last else list(batch),
        record=last.record if last else None,
    )


def failed(
    batch: Sequence[str],
    record: VerifyRecord,
    *,
    culprit: str | None,
    tasks: Sequence[str],
    tests_of: TestsOf,
) -> GateLast:
    """The verification that named a culprit (or found the head broken)."""
    return GateLast(
        verdict=str(Verdict.FAIL),
        at=round(time.time(), 3),
        batch=list(batch),
        step="bisection" if culprit else "head",
        commit=record.commit,
        tasks=list(tasks),
        record=record.id,
        culprit=culprit,
        failures=failures(record, tests_of),
    )


def lines(last: GateLast | None, *, head_verified: bool = True) -> list[str]:
    """`forge status`: the gate's last verification that did not land (when the
    integration head was never verified, an interruption is the verification)."""
    if not last:
        return []
    commit = (last.commit or "")[:12]
    on = f" on {commit}" if commit else ""
    tasks = ", ".join(last.tasks) or "-"
    if last.verdict == Verdict.INTERRUPTED:
        batch = ", ".join(last.batch)
        what = "gate: verification" if head_verified else "verification:"
        return [
            f"{what} INTERRUPTED ({last.step}{on} of {tasks}); "
            f"batch {batch} stays QUEUED for the next run"
        ]
    who = f"culprit {last.culprit}" if last.culprit else "the head fails on its own"
    out = [f"gate: last failing verification FAIL{on} (candidate {tasks}; {who})"]
    for f in last.failures:
        test = f" {f.test}" if f.test else ""
        said = f": {f.message}" if f.message else ""
        out.append(f"  failing: lane {f.lane}{test}{said} (log {f.log or '-'})")
    return out


# -- the run's outcome, for the report ---------------------------------------

NOT_LANDED = (Status.FAILED, Status.TIMEOUT, Status.CONFLICT, Status.BLOCKED, Status.INFRA)


def culprits(state: RunState) -> list[str]:
    """Tasks the gate blamed: FAILED by a verification."""
    return [
        tid
        for tid, ts in state.tasks.items()
        if ts.status == Status.FAILED and ts.last is not None and by_gate(ts.last.feedback_source)
    ]


def outcome(state: RunState) -> tuple[str, str]:
    """The badge's text and class: `PASS`, `PASS · 1 culprit`, `FAIL`,
    `INTERRUPTED`, never a bare PASS next to a task that did not land."""
    verdict = str(state.verification.verdict) if state.verification else "not verified"
    last = state.gate_last
    if (last is not None and last.verdict == Verdict.INTERRUPTED) or any(
        ts.status == Status.INTERRUPTED for ts in state.tasks.values()
    ):
        return str(Verdict.INTERRUPTED), "fail"
    if verdict == Verdict.FAIL:
        return verdict, "fail"
    blamed = culprits(state)
    others = [
        tid for tid, ts in state.tasks.items() if ts.status in NOT_LANDED and tid not in blamed
    ]
    parts = [verdict]
    if blamed:
        parts.append(f"{len(blamed)} culprit{'s' * (len(blamed) != 1)}")
    if others:
        parts.append(f"{len(others)} not landed")
    ok = verdict in (Verdict.PASS, Verdict.FLAKY)
    cls = ("pass" if len(parts) == 1 else "mixed") if ok else "none"
    return " \u00b7 ".join(parts), cls


def _pairs(tests: Mapping[str, frozenset[str]]) -> list[LaneTest]:
    return [LaneTest(lane, t) for lane in sorted(tests) for t in sorted(tests[lane])]


def empty_reason(record: VerifyRecord) -> str:
    """Why a verification whose test runner ran no test lands nothing."""
    lanes = [lane for lane in record.lanes if lane.verdict == Verdict.EMPTY]
    said = "; ".join(f"lane {lane.name} {lane.reason}" for lane in lanes)
    return (
        f"verification of {record.commit[:12]}: {said}: fix the lane's command, or set "
        f"`allow_empty = true` in its [verify.lanes.NAME] table"
    )


def known_red(state: RunState) -> dict[str, frozenset[str]]:
    """The tests the integration head was last seen to fail on its own, by lane."""
    out: dict[str, frozenset[str]] = {}
    for t in state.pre_existing.tests if state.pre_existing else []:
        out[t.lane] = out.get(t.lane, frozenset()) | {t.test}
    return out


def landed(
    state: RunState,
    tasks: Sequence[str],
    tip: str,
    pre_existing: Mapping[str, frozenset[str]],
    *,
    flaky: Mapping[str, frozenset[str]],
) -> tuple[list[LaneTest], list[ev.Event]]:
    """The head moved to `tip` (every test run there): what it still fails is what
    the head fails already; what it failed before and no longer does is fixed,
    credited to `tasks`. Returns those fixed now, and the event that records it."""
    known = state.pre_existing
    now = _pairs(pre_existing)
    was = [(t.lane, t.test) for t in known.tests] if known else []
    still = {(t.lane, t.test) for t in now}
    flaked = {(lane, t) for lane, ids in flaky.items() for t in ids}
    fixed = [
        LaneTest(lane, test, list(tasks))
        for lane, test in was
        if (lane, test) not in still and (lane, test) not in flaked
    ]
    if not (now or fixed or known):
        return fixed, []
    recorded = PreExisting(tip, now, (known.fixed if known else []) + fixed)
    return fixed, [ev.PreExistingRecorded(recorded)]


def known_lines(
    pre_existing: Mapping[str, frozenset[str]],
    fixed: Sequence[LaneTest],
    tasks: Sequence[str],
) -> list[str]:
    """What a landing says of the head's own failures."""
    out = []
    if pre_existing:
        out.append(f"already failing on the head: {_names(_pairs(pre_existing))}")
    if fixed:
        out.append(f"{', '.join(tasks)} fixed {_names(fixed)} (failing on the head before)")
    return out


def _names(tests: Sequence[LaneTest], most: int = 5) -> str:
    names = [t.test for t in tests]
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def pre_existing_lines(known: PreExisting | None) -> list[str]:
    """`forge status` and a run's summary: the head's own failures, and the fixes."""
    if not known:
        return []
    out = []
    if known.tests:
        out.append(f"already failing on the head: {_names(known.tests)} (blames no task)")
    for fix in known.fixed:
        out.append(f"fixed by {', '.join(fix.by or [])}: {fix.test}")
    return out


def blame_reason(
    record: VerifyRecord, *, order_dependent: bool = False
) -> tuple[str, str | None, str]:
    """The culprit's reason, the failing lane's last log, and the lane's name."""
    bad = next((lane for lane in record.lanes if lane.verdict == Verdict.FAIL), None)
    if bad is None:
        return f"breaks verification ({record.verdict})", None, "?"
    log = bad.runs[-1].log if bad.runs else None
    if order_dependent and bad.names_tests:
        tests = [f.test for f in bad.failures if f.test]
        shown = ", ".join(tests[:3]) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")
        return (
            f"breaks verification: lane {bad.name}: {shown} fails in the whole run, passes "
            f"alone (order-dependent)",
            log,
            bad.name,
        )
    if bad.names_tests:  # the failing tests name the cause better than a log's path
        return f"breaks verification: lane {bad.name}: {bad.reason}", log, bad.name
    where = f" (log {log})" if log else ""
    return f"breaks verification: lane {bad.name} {bad.reason}{where}", log, bad.name


def only(record: VerifyRecord, tests: Mapping[str, frozenset[str]]) -> VerifyRecord:
    """`record` (a FAIL) naming only `tests` among its failures, lane by lane: a
    culprit's own. A lane none of whose failures is among them (or that names none)
    is left as it is when `tests` says nothing of it."""
    if not tests:
        return record
    lanes = []
    for lane in record.lanes:
        mine = tests.get(lane.name)
        if lane.verdict != Verdict.FAIL or not lane.runs or mine is None:
            lanes.append(lane)
            continue
        last = lane.runs[-1]
        kept = tuple(f for f in last.failures if f.test in mine) or last.failures
        lanes.append(replace(lane, runs=(*lane.runs[:-1], replace(last, failures=kept))))
    return replace(record, lanes=tuple(lanes))


def keep_step(
    ctx: RunContext,
    kind: StepKind,
    started: float,
    record: VerifyRecord,
    *,
    name: str,
    tasks: Sequence[str],
) -> None:
    """One verification the gate ran, kept in the state's `gate_steps` with the run
    it belongs to (the caller holds the store's lock). `name`: a subset's, why it ran."""
    phase = ctx.state.gate.phase if ctx.state.gate else None
    if kind == StepKind.BATCH and phase == GatePhase.BISECTING:
        kind = StepKind.BISECTION
    kept = step(
        kind, started, record, name=name or kind, tasks=tasks, tests_of=flakes.failing_tests
    )
    kept.run = len(ctx.state.invocations) - 1
    ctx.record(ev.GateStepKept(kept), later=True)


def tell(
    ctx: RunContext,
    batch: list[str],
    out: Outcome,
    *,
    since: int,
    tasks_of: Mapping[str, tuple[str, ...]],
) -> None:
    """The state's `gate_last` after a batch (the caller holds the store's lock):
    its interruption (from this run's steps, `since` on), its failure, or nothing
    once a later verification passed an interruption."""
    last = ctx.state.gate_last
    if out.interrupted or ctx.stop.is_set():
        phase = ctx.state.gate.phase if ctx.state.gate else None
        last = interrupted(batch, ctx.state.gate_steps[since:], phase)
    elif out.broken_head is not None or out.culprit is not None:
        record = out.broken_head or out.culprit_record
        assert isinstance(record, VerifyRecord)
        culprit = out.culprit.task if out.culprit else None
        tasks = tasks_of.get(record.commit, ())
        last = failed(batch, record, culprit=culprit, tasks=tasks, tests_of=flakes.failing_tests)
    elif last and last.verdict == Verdict.INTERRUPTED:
        last = None  # verified since: the interruption is history
    ctx.record(ev.GateLastRecorded(last), later=True)


def landing_verdict(
    record: VerifyRecord, tip: str, *, flaky: Mapping[str, frozenset[str]]
) -> tuple[VerifyRecord, VerifiedBy]:
    """The verification a landing records (a whole run of every lane that exited 0),
    and what covers each task it lands. Tests that failed a whole run of the same
    tree before this one passed (`flaky`: by lane) make it FLAKY, named in each
    lane's last run (so its summary names them)."""
    landed = record
    if flaky and record.verdict in (Verdict.PASS, Verdict.FLAKY):
        lanes = tuple(_flaked(lane, flaky.get(lane.name, frozenset())) for lane in record.lanes)
        landed = replace(record, lanes=lanes, verdict=Verdict.FLAKY)
    landed = replace(landed, commit=tip)
    covered = VerifiedBy.from_dict(
        {"record": record.id, "commit": tip, "verdict": str(landed.verdict), **named_tests(landed)}
    )
    return landed, covered


def _flaked(lane: LaneResult, tests: frozenset[str]) -> LaneResult:
    """A lane that passed, `tests` of which failed in an earlier whole run."""
    if not tests or not lane.runs:
        return lane
    last = lane.runs[-1]
    runs = (*lane.runs[:-1], replace(last, flaky=tuple(sorted(tests))))
    return replace(lane, verdict=Verdict.FLAKY, runs=runs)


def as_record(judged: object) -> VerifyRecord:
    """A judged prefix's record (bisection.py keeps them as its `Judged`)."""
    assert isinstance(judged, VerifyRecord)
    return judged
