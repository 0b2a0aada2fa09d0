"""The one place that sets the fields of a run's state: `apply(state, event)`.

Every writer says what happened as an event (forge/run/state/events.py); the store
applies it here and journals it (forge/run/state/store.py), and replaying a
journal is applying its events again over the snapshot. A status and its fields
never drift apart: each case sets all that its event means."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from forge.run.state import events as ev
from forge.run.state.records import Phase, Source
from forge.run.state.run_state import Attempt, Invocation, Lost, RunState, Status, TaskState

E = TypeVar("E", bound=ev.Event)
R = TypeVar("R", Attempt, TaskState, RunState)
N = TypeVar("N", int, float)


def apply(st: RunState, event: ev.Event) -> None:
    """Apply one event to the state."""
    if isinstance(event, ev.AttemptEvent):
        found = _attempt(st.record(event.task), event.attempt)
        if found is not None:
            _ATTEMPT[type(event)](found, event)
    elif isinstance(event, ev.TaskEvent):
        _TASK[type(event)](st.record(event.task), event)
    else:
        _PLAN[type(event)](st, event)


def apply_attempt(attempt: Attempt, event: ev.Event) -> None:
    """Apply an attempt's event to an attempt outside any run state (a cluster
    worker's, a planner's, a judge's)."""
    _ATTEMPT[type(event)](attempt, event)


def _attempt(ts: TaskState, number: int | None) -> Attempt | None:
    if number is None:
        return ts.last
    return next((a for a in reversed(ts.attempts) if a.number == number), None)


def _case(
    kind: type[E], apply: Callable[[R, E], None]
) -> tuple[type, Callable[[R, ev.Event], None]]:
    """A table's entry: the events of `kind` are applied to a record by `apply`."""

    def case(record: R, event: ev.Event) -> None:
        assert isinstance(event, kind)  # (the tables are looked up by the event's type)
        apply(record, event)

    return kind, case


# -- an attempt's own fields ------------------------------------------------------


def _phase_started(a: Attempt, e: ev.PhaseStarted) -> None:
    a.phases.append(Phase(e.name, e.start))


def _phase_ended(a: Attempt, e: ev.PhaseEnded) -> None:
    for phase in reversed(a.phases):
        if phase.end is None and e.name in (None, phase.name):
            phase.end = e.end
            return


def _process(a: Attempt, e: ev.ProcessGroup) -> None:
    a.pgid = e.pgid


def _feedback(a: Attempt, e: ev.FeedbackNoted) -> None:
    if e.log is not None:
        a.log = e.log
    if e.source is not None:
        a.feedback_source = e.source


def _committed(a: Attempt, e: ev.Committed) -> None:
    a.commit, a.diff_hash = e.commit, e.diff_hash


def _add(a: N | None, b: N | None) -> N | None:
    return b if a is None else a if b is None else a + b


def _usage(a: Attempt, e: ev.AttemptUsage) -> None:
    a.cost_usd = _add(a.cost_usd, e.cost_usd)
    a.input_tokens = _add(a.input_tokens, e.input_tokens)
    a.output_tokens = _add(a.output_tokens, e.output_tokens)


def _models(a: Attempt, e: ev.ModelsReported) -> None:
    a.models = None if e.models is None else list(e.models)
    a.model_mismatch = e.mismatch


def _reviewed(a: Attempt, e: ev.Reviewed) -> None:
    a.review = e.review


def _ran_in(a: Attempt, e: ev.RanIn) -> None:
    if e.slot is not None:
        a.slot = e.slot
    if e.where is not None:
        a.where = e.where


_ATTEMPT: dict[type, Callable[[Attempt, ev.Event], None]] = dict(
    [
        _case(ev.PhaseStarted, _phase_started),
        _case(ev.PhaseEnded, _phase_ended),
        _case(ev.ProcessGroup, _process),
        _case(ev.FeedbackNoted, _feedback),
        _case(ev.Committed, _committed),
        _case(ev.AttemptUsage, _usage),
        _case(ev.ModelsReported, _models),
        _case(ev.Reviewed, _reviewed),
        _case(ev.RanIn, _ran_in),
    ]
)

# -- a task's record ---------------------------------------------------------------


def _started(ts: TaskState, e: ev.AttemptStarted) -> None:
    ts.attempts.append(e.record)
    ts.status, ts.reason, ts.runner = Status.RUNNING, "", e.runner
    ts.doubted = False


def _doubted(ts: TaskState, e: ev.BlameDoubted) -> None:
    del e  # (the task is the event's whole content)
    ts.doubted = ts.status == Status.FAILED


def _pinned(ts: TaskState, e: ev.Pinned) -> None:
    ts.base, ts.branch = e.base, e.branch


def _ended(ts: TaskState, e: ev.AttemptEnded) -> None:
    last = ts.last
    if last is not None:
        last.status, last.reason, last.stall, last.pgid = e.status, e.reason, e.stall, None
        last.infra_kind = e.infra_kind
        if e.duration is not None:
            last.duration = e.duration
    ts.status, ts.reason, ts.runner = e.status, e.reason, None


def _close_phases(a: Attempt | None, at: float | None) -> None:
    """A verdict's consequence: the attempt's open phases end when it was given."""
    if a is None or at is None:
        return
    for phase in a.phases:
        if phase.end is None:
            phase.end = at


def _merged(ts: TaskState, e: ev.Merged) -> None:
    ts.status, ts.reason = Status.MERGED, ""
    ts.merged_commit, ts.merged_definition = e.commit, e.definition
    if e.verified_by is not None:
        ts.verified_by = e.verified_by
    if ts.last is not None:
        ts.last.status, ts.last.reason = Status.MERGED, ""
    _close_phases(ts.last, e.at)


def _failed(ts: TaskState, e: ev.Failed) -> None:
    ts.status, ts.reason = e.status, e.reason
    last = ts.last
    if last is not None:
        last.status, last.reason = e.status, e.reason
        last.log, last.feedback_source = e.log, e.source
        # (a SELECTION failure is a runner-up's: it passed, and another landed)
        last.lost = Lost.NOT_CHOSEN if e.source.kind == Source.SELECTION else None
        if e.failures is not None:
            last.failures = list(e.failures)
    _close_phases(last, e.at)
    if e.verified_by is not None:
        ts.verified_by = e.verified_by


def _given_back(ts: TaskState, e: ev.GivenBack) -> None:
    last = ts.last
    if last is not None:
        last.status, last.reason, last.feedback_source = Status.QUEUED, e.note, None
        last.failures = []
        if e.log is not None:
            last.log = e.log
    ts.status, ts.reason, ts.verified_by = Status.QUEUED, e.note, None
    ts.doubted = False


def _interrupted(ts: TaskState, e: ev.Interrupted) -> None:
    if ts.last is not None:
        ts.last.status, ts.last.reason, ts.last.pgid = Status.INTERRUPTED, e.reason, None
    ts.status, ts.reason, ts.runner = Status.INTERRUPTED, e.reason, None


def _blocked(ts: TaskState, e: ev.Blocked) -> None:
    ts.status, ts.reason = Status.BLOCKED, e.reason


def _unblocked(ts: TaskState, _e: ev.Unblocked) -> None:
    ts.status, ts.reason = Status.PENDING, ""


def _reopened(ts: TaskState, e: ev.Reopened) -> None:
    ts.status, ts.reason = Status.PENDING, e.reason
    ts.base = None
    ts.merged_commit = ts.merged_definition = None


def _rebased(ts: TaskState, e: ev.Rebased) -> None:
    ts.base = e.base


def _advised(ts: TaskState, e: ev.Advised) -> None:
    if e.suggestion:
        ts.suggestion = e.suggestion
    ts.reason = ts.reason or e.reason


def _agent_set(ts: TaskState, e: ev.AgentSet) -> None:
    ts.agent = e.agent


def _warned(ts: TaskState, e: ev.Warned) -> None:
    ts.warnings.append(e.message)


def _salvaged(ts: TaskState, e: ev.Salvaged) -> None:
    ts.salvage.extend(r for r in e.refs if r not in ts.salvage)


def _candidate_added(ts: TaskState, e: ev.CandidateAdded) -> None:
    ts.candidates[e.unit] = TaskState(id=e.unit, candidate=e.label)


def _candidates_running(ts: TaskState, e: ev.CandidatesRunning) -> None:
    ts.status, ts.reason, ts.runner = Status.RUNNING, "", e.runner


def _queued(ts: TaskState, e: ev.Queued) -> None:
    ts.attempts.append(e.landing)
    ts.status, ts.reason, ts.runner = Status.QUEUED, "", None
    ts.base, ts.branch = e.base, e.branch


def _outrun(ts: TaskState, e: ev.Outrun) -> None:
    ts.reason = e.reason
    if ts.last is not None:
        ts.last.reason, ts.last.lost = e.reason, Lost.STOPPED


def _concluded(ts: TaskState, e: ev.Concluded) -> None:
    ts.status, ts.reason, ts.runner = e.status, e.reason, None


_TASK: dict[type, Callable[[TaskState, ev.Event], None]] = dict(
    [
        _case(ev.AttemptStarted, _started),
        _case(ev.Pinned, _pinned),
        _case(ev.AttemptEnded, _ended),
        _case(ev.Merged, _merged),
        _case(ev.Failed, _failed),
        _case(ev.GivenBack, _given_back),
        _case(ev.Interrupted, _interrupted),
        _case(ev.Blocked, _blocked),
        _case(ev.Unblocked, _unblocked),
        _case(ev.Reopened, _reopened),
        _case(ev.Rebased, _rebased),
        _case(ev.Advised, _advised),
        _case(ev.AgentSet, _agent_set),
        _case(ev.Warned, _warned),
        _case(ev.BlameDoubted, _doubted),
        _case(ev.Salvaged, _salvaged),
        _case(ev.CandidateAdded, _candidate_added),
        _case(ev.CandidatesRunning, _candidates_running),
        _case(ev.Queued, _queued),
        _case(ev.Outrun, _outrun),
        _case(ev.Concluded, _concluded),
    ]
)

# -- slots and the plan-wide part ------------------------------------------------


def _slot_added(st: RunState, e: ev.SlotAdded) -> None:
    st.slots[e.slot.name] = e.slot


def _slot_removed(st: RunState, e: ev.SlotRemoved) -> None:
    st.slots.pop(e.name, None)


def _slot_taken(st: RunState, e: ev.SlotTaken) -> None:
    slot = st.slots[e.name]
    slot.task = e.task
    if e.dirty:
        slot.clean = False
    st.record(e.task).slot = e.name


def _slot_set_up(st: RunState, e: ev.SlotSetUp) -> None:
    st.slots[e.name].setup_done = e.done


def _slot_freed(st: RunState, e: ev.SlotFreed) -> None:
    slot = st.slots.get(e.name or "")
    if slot is not None:
        slot.task = None
        if e.clean is not None:
            slot.clean = e.clean
    if e.task is not None and st.owner(e.task) in st.tasks:
        st.record(e.task).slot = None


def _slot_measured(st: RunState, e: ev.SlotMeasured) -> None:
    st.slots[e.name].bytes = e.bytes


def _run_started(st: RunState, e: ev.RunStarted) -> None:
    st.started, st.finished, st.paused = e.started, None, None
    st.invocations = [*st.invocations[-(e.kept - 1) :], Invocation(started=e.started)]


def _touched(st: RunState, e: ev.Touched) -> None:
    st.touched = None if e.touched is None else list(e.touched)


def _run_finished(st: RunState, e: ev.RunFinished) -> None:
    st.finished, st.wall_seconds = e.finished, e.wall_seconds
    _settled(st, ev.BlamesSettled())
    if st.invocations:
        st.invocations[-1].finished = e.finished
        st.invocations[-1].wall_seconds = e.wall_seconds


def _settled(st: RunState, e: ev.BlamesSettled) -> None:
    del e  # (an event without fields)
    for ts in st.tasks.values():  # no more evidence comes: a blame still standing holds
        ts.doubted = False


def _paused(st: RunState, e: ev.Paused) -> None:
    st.paused = e.reason


def _verification(st: RunState, e: ev.VerificationRecorded) -> None:
    st.verification, st.verification_sealed = e.verification, e.sealed


def _gate(st: RunState, e: ev.GateRecorded) -> None:
    st.gate = e.gate


def _gate_step(st: RunState, e: ev.GateStepKept) -> None:
    st.gate_steps.append(e.step)


def _step_cleared(st: RunState, e: ev.StepCleared) -> None:
    for step in st.gate_steps:
        if step.commit == e.commit and e.task in step.tasks and e.task not in step.cleared:
            step.cleared.append(e.task)


def _gate_last(st: RunState, e: ev.GateLastRecorded) -> None:
    st.gate_last = e.last


def _pre_existing(st: RunState, e: ev.PreExistingRecorded) -> None:
    st.pre_existing = e.pre_existing


def _tasks_kept(st: RunState, e: ev.TasksKept) -> None:
    st.tasks = {tid: st.tasks.get(tid) or TaskState(id=tid) for tid in e.order}


def _task_replaced(st: RunState, e: ev.TaskReplaced) -> None:
    st.tasks[e.task] = e.state


def _plan_wide_replaced(st: RunState, e: ev.PlanWideReplaced) -> None:
    for name in e.names:
        setattr(st, name, getattr(e.wide, name))


_PLAN: dict[type, Callable[[RunState, ev.Event], None]] = dict(
    [
        _case(ev.SlotAdded, _slot_added),
        _case(ev.SlotRemoved, _slot_removed),
        _case(ev.SlotTaken, _slot_taken),
        _case(ev.SlotSetUp, _slot_set_up),
        _case(ev.SlotFreed, _slot_freed),
        _case(ev.SlotMeasured, _slot_measured),
        _case(ev.RunStarted, _run_started),
        _case(ev.RunFinished, _run_finished),
        _case(ev.BlamesSettled, _settled),
        _case(ev.Touched, _touched),
        _case(ev.Paused, _paused),
        _case(ev.VerificationRecorded, _verification),
        _case(ev.GateRecorded, _gate),
        _case(ev.GateStepKept, _gate_step),
        _case(ev.StepCleared, _step_cleared),
        _case(ev.GateLastRecorded, _gate_last),
        _case(ev.PreExistingRecorded, _pre_existing),
        _case(ev.TasksKept, _tasks_kept),
        _case(ev.TaskReplaced, _task_replaced),
        _case(ev.PlanWideReplaced, _plan_wide_replaced),
    ]
)
