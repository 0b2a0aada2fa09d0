"""What happens to a run, as typed events: the run journal's lines.

A plan's run state is what these events leave when applied in order
(forge/run/state/reducer.py, the one place that sets the state's fields). Each
event is a frozen record of one change; the store writes each as a line of its
journal and reads it back (forge/run/state/store.py).

An event of a task (a `TaskEvent`) is keyed by the task's record (`<task>+<n>` for
a best-of-N candidate's); one of an attempt (an `AttemptEvent`) also by the
attempt's number (None: the task's last attempt). The reducer finds the record by
the key, so an event's kind says what it changes."""

from __future__ import annotations

from forge.base.liveness import Owner
from forge.frozen import frozen
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
)
from forge.verify.records import VerifyRecord


@frozen
class Event:
    """What happened to a run (each kind below is one)."""


@frozen
class TaskEvent(Event):
    """What happened to a task: keyed by its record's id."""

    task: str


@frozen
class AttemptEvent(TaskEvent):
    """What happened to one attempt of a task: keyed by the task and the attempt's
    number (None: the task's last attempt)."""

    attempt: int | None


# -- an attempt: its start, its steps, its end -----------------------------------


@frozen
class AttemptStarted(TaskEvent):
    """A new attempt of the task starts, run by `runner`."""

    record: Attempt
    runner: Owner


@frozen
class Pinned(TaskEvent):
    """The task's base (pinned at its first attempt) and its branch."""

    base: str | None
    branch: str | None


@frozen
class PhaseStarted(AttemptEvent):
    name: str
    start: float


@frozen
class PhaseEnded(AttemptEvent):
    """The attempt's open phase ends (`name`: the last open phase of that name)."""

    end: float
    name: str | None = None


@frozen
class ProcessGroup(AttemptEvent):
    """The attempt's process group while it runs (None: it is stopped)."""

    pgid: int | None


@frozen
class FeedbackNoted(AttemptEvent):
    """What failed the attempt (or will, if it fails here) and the log saying why
    (None: unchanged)."""

    log: str | None = None
    source: FeedbackSource | None = None


@frozen
class Committed(AttemptEvent):
    """The task branch head the attempt produced, and its change's hash."""

    commit: str
    diff_hash: str | None


@frozen
class AttemptUsage(AttemptEvent):
    """Spend the agent (or its reviewer, or a judge) reported: added to the attempt's."""

    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None


@frozen
class ModelsReported(AttemptEvent):
    models: tuple[str, ...] | None
    mismatch: str | None


@frozen
class Reviewed(AttemptEvent):
    """The reviewer's verdict on the attempt (forge/run/attempt/review.py)."""

    review: Review | None


@frozen
class RanIn(AttemptEvent):
    """Where the attempt ran: its slot here, or the cluster worker (`where`)."""

    slot: str | None = None
    where: str | None = None


@frozen
class AttemptEnded(TaskEvent):
    """The last attempt ended as `status` (the task too)."""

    status: Status
    reason: str
    stall: Stall | None = None
    duration: float | None = None
    infra_kind: str | None = None  # INFRA: what kept it from running


# -- a task's verdicts after its attempt ---------------------------------------


@frozen
class Merged(TaskEvent):
    """Its work is on the integration branch, landed by the merge `commit`; `at`:
    when, and its last attempt's open phases end then (None: they are left)."""

    commit: str | None
    definition: str | None
    verified_by: VerifiedBy | None = None
    at: float | None = None


@frozen
class Failed(TaskEvent):
    """Its last attempt failed after it ended (at the merge or the gate): `source`
    says what failed it, `log` where to read why; the gate's verification names
    the failing tests (`failures`) and itself (`verified_by`); `at`: when, and the
    attempt's open phases end then (None: they are left)."""

    status: Status
    reason: str
    log: str | None
    source: FeedbackSource
    failures: tuple[Failure, ...] | None = None
    verified_by: VerifiedBy | None = None
    at: float | None = None


@frozen
class GivenBack(TaskEvent):
    """The gate's blame withdrawn (its tests proved flaky): QUEUED, the same change;
    `log` is the attempt's own log again (the blame had put the verification's)."""

    note: str
    log: str | None = None


@frozen
class BlameDoubted(TaskEvent):
    """The gate blamed `task` on tests that may yet prove flaky: until the run ends
    (or the blame is given back) it is FAILED with its evidence pending, a view's
    "blamed, waiting for evidence", not a status of its own."""


@frozen
class BlamesSettled(Event):
    """The gate has nothing more to verify in this run: no evidence comes, and every
    blame still waiting for it holds."""


@frozen
class StepCleared(Event):
    """The gate's verification of `commit` blamed `task`, and the blame was given
    back: the step is shown as cleared."""

    commit: str
    task: str


@frozen
class Interrupted(TaskEvent):
    """Its runner is gone: the attempt spent nothing."""

    reason: str


@frozen
class Blocked(TaskEvent):
    reason: str


@frozen
class Unblocked(TaskEvent):
    """BLOCKED no more: PENDING again."""


@frozen
class Reopened(TaskEvent):
    """PENDING again, its merge forgotten: it runs again on what integration is then."""

    reason: str


@frozen
class Rebased(TaskEvent):
    """Its base moves (its slot was reset onto the integration head)."""

    base: str | None


@frozen
class Advised(TaskEvent):
    """The escalation policy stops: why (kept when one is said), and what to do."""

    reason: str
    suggestion: str | None


@frozen
class AgentSet(TaskEvent):
    """`forge retry --agent`: the spec the task runs with from now on."""

    agent: str | None


@frozen
class Warned(TaskEvent):
    message: str


@frozen
class Salvaged(TaskEvent):
    """Refs holding the task's salvaged work (each kept once)."""

    refs: tuple[str, ...]


# -- best-of-N -------------------------------------------------------------------


@frozen
class CandidateAdded(TaskEvent):
    unit: str
    label: str


@frozen
class CandidatesRunning(TaskEvent):
    """A best-of-N task whose candidate runs: RUNNING, with no attempt of its own."""

    runner: Owner


@frozen
class Queued(TaskEvent):
    """A candidate's work waits for the gate as the task's `landing` attempt."""

    landing: Attempt
    base: str | None
    branch: str | None


@frozen
class Outrun(TaskEvent):
    """A candidate that lost to another (its reason says which)."""

    reason: str


@frozen
class Concluded(TaskEvent):
    """Its candidates ended (or stopped) with none left to land: the task's verdict."""

    status: Status
    reason: str


# -- slots -----------------------------------------------------------------------


@frozen
class SlotAdded(Event):
    slot: Slot


@frozen
class SlotRemoved(Event):
    name: str


@frozen
class SlotTaken(Event):
    """The slot holds `task`'s work (`dirty`: from now on it may hold uncommitted work)."""

    name: str
    task: str
    dirty: bool = True


@frozen
class SlotSetUp(Event):
    name: str
    done: bool


@frozen
class SlotFreed(Event):
    """The slot holds no task's work (`clean`: nor anything uncommitted); `task`, if
    given, no longer has a slot."""

    name: str | None
    clean: bool | None
    task: str | None = None


@frozen
class SlotMeasured(Event):
    name: str
    bytes: int | None


# -- the plan-wide part ---------------------------------------------------------


@frozen
class RunStarted(Event):
    """A `forge run` (or retry) starts; `kept` invocations stay recorded."""

    started: str
    kept: int


@frozen
class RunFinished(Event):
    finished: str
    wall_seconds: float


@frozen
class Touched(Event):
    """What changed in the user's checkout while the run ran (None: not measured)."""

    touched: tuple[str, ...] | None


@frozen
class Paused(Event):
    """Why the run paused (None: it is not paused)."""

    reason: str | None


@frozen
class VerificationRecorded(Event):
    """The integration head's verification (`sealed`: it carries forge's seal)."""

    verification: VerifyRecord | None
    sealed: bool = True


@frozen
class GateRecorded(Event):
    """The batch under verification and a landing's intent (None: no batch)."""

    gate: GateRecord | None


@frozen
class GateStepKept(Event):
    """One verification the gate ran (forge/run/gate/story.py)."""

    step: GateStep


@frozen
class GateLastRecorded(Event):
    last: GateLast | None


@frozen
class PreExistingRecorded(Event):
    pre_existing: PreExisting | None


@frozen
class TasksKept(Event):
    """The plan's tasks, in its order: those not named are forgotten, those new start
    PENDING."""

    order: tuple[str, ...]


@frozen
class TaskReplaced(Event):
    """A task's whole record (a line of an earlier forge's journal held one)."""

    task: str
    state: TaskState


@frozen
class PlanWideReplaced(Event):
    """The plan-wide fields `names` (slots, verification, ...), as `wide` holds them:
    an earlier forge's journal line held them all."""

    wide: RunState
    names: tuple[str, ...]
