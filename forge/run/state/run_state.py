"""A plan's run state: task statuses, attempts, slots and the last verification.

The records only: what changes them is an event (forge/run/state/events.py)
applied by the reducer (forge/run/state/reducer.py), and the store
(forge/run/state/store.py) journals each before the action it records."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum

from forge.base import seal, shape
from forge.base.clock import now_iso
from forge.base.files import SCHEMA_VERSION, JsonObject
from forge.base.liveness import Owner
from forge.plan.candidates import LOST, NOT_CHOSEN, task_of_unit
from forge.run.state import records
from forge.run.state.gate_record import GateRecord
from forge.run.state.gate_story import GateLast, GateStep, PreExisting, steps_from
from forge.run.state.records import Failure, Phase, Review, VerifiedBy
from forge.run.state.records import FeedbackSource as Feedback
from forge.verify.records import VerifyRecord

KEPT = 200  # invocations kept (the oldest go first)


@dataclass
class Invocation:
    """A `forge run` or `forge retry` of the plan, kept in its run state: when it
    started and ended, so the report tells nine invocations as nine (the timeline
    merges those close together into one stretch of activity)."""

    started: str  # ISO time
    finished: str | None = None
    wall_seconds: float | None = None


class Status(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    QUEUED = "QUEUED"  # finished, waiting for (or in) the gate's verification
    MERGED = "MERGED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CONFLICT = "CONFLICT"
    BLOCKED = "BLOCKED"
    INFRA = "INFRA"
    INTERRUPTED = "INTERRUPTED"


class Stall(StrEnum):
    """A FAILED attempt whose work went nowhere: a fact the dispatcher and the
    escalation policy act on (no automatic retry), not a reason's wording."""

    NO_CHANGES = "no-changes"  # the work adds up to nothing
    NO_PROGRESS = "no-progress"  # the same change as the judged attempt before it


# Statuses that spent an attempt and wait for `forge retry` (or --retry-failed).
FAILURES = frozenset({Status.FAILED, Status.TIMEOUT, Status.CONFLICT})
# Statuses that `forge run` dispatches again by itself: they spent no attempt.
REDISPATCH = frozenset({Status.PENDING, Status.INTERRUPTED, Status.INFRA, Status.BLOCKED})

# Attempts that spent nothing (the agent could not run, or the user stopped it):
# history, not attempts. The attempt an agent is told it is counts only the rest.
UNCOUNTED = frozenset({Status.INFRA, Status.INTERRUPTED})


def counted(attempts: list[Attempt]) -> int:
    return sum(1 for a in attempts if a.status not in UNCOUNTED)


class Lost(StrEnum):
    """A best-of-N candidate that ended because another landed: a fact the views and
    the spend read, not its reason's wording (which names the winner)."""

    STOPPED = "stopped"  # stopped while it ran: "stopped: lost to <winner>"
    NOT_CHOSEN = "not-chosen"  # it passed, and another was chosen: "passed, not chosen"


_FIELDS: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    # Once per class: `fields()` per record is a third of loading 1000 tasks' state.
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in fields(cls))
    return names


@dataclass
class Attempt:
    number: int
    agent: str  # the spec used: name[:model[:effort]], or "run" for a shell task
    model: str | None = None
    effort: str | None = None
    status: Status = Status.RUNNING
    reason: str = ""
    started: str = field(default_factory=now_iso)
    duration: float | None = None
    log: str | None = None
    commit: str | None = None  # the task branch head this attempt produced
    diff_hash: str | None = None  # sha256 of the diff against the pinned base
    feedback_source: Feedback | None = None  # what failed: agent, check, merge, verify:<lane>
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    fallback: str | None = None  # why a fallback agent ran instead of the task's own
    review: Review | None = None  # the reviewer's verdict: agent, verdict, findings
    pgid: int | None = None  # the agent's process group while it runs
    tag: str | None = None  # FORGE_PROC_TAG of its processes, for crash recovery
    stall: Stall | None = None  # FAILED because the work went nowhere
    infra_kind: str | None = None  # INFRA: what kept it from running (rate-limit, quota, ...)
    where: str | None = None  # the cluster worker that ran it (None: this machine)
    slot: str | None = None  # the worktree slot it ran in
    candidate: str | None = None  # best-of-N: the candidate it is (label), or whose work it lands
    phases: list[Phase] = field(default_factory=list)  # its steps (run/attempt/phases.py)
    models: list[str] | None = None  # the models the CLI reported it used
    model_mismatch: str | None = None  # "asked opus, ran claude-sonnet-4-5"
    propensity: float | None = None  # a chosen (`auto`) spec: the choice's probability
    chosen_from: list[str] | None = None  # the specs it was chosen from
    failures: list[Failure] = field(default_factory=list)  # of the verification that failed it
    lost: Lost | None = None  # best-of-N: it ended because another candidate landed

    @classmethod
    def from_dict(cls, data: JsonObject) -> Attempt:
        names = _field_names(cls)
        typed = records.typed_parts(data)
        attempt = cls(**{**{k: v for k, v in data.items() if k in names}, **typed})
        attempt.status = Status(attempt.status)
        attempt.stall = Stall(attempt.stall) if attempt.stall else _old_stall(data)
        attempt.lost = Lost(attempt.lost) if attempt.lost else _old_lost(data)
        if "infra_kind" not in data:
            attempt.infra_kind = _old_infra_kind(data)
        return attempt


def _old_lost(data: JsonObject) -> Lost | None:
    """A state file from before `lost` was recorded said it only in the reason."""
    reason = str(data.get("reason") or "")
    if "lost" in data:
        return None
    if data.get("status") == Status.INTERRUPTED and reason.startswith(LOST):
        return Lost.STOPPED
    return Lost.NOT_CHOSEN if reason == NOT_CHOSEN else None


def _old_stall(data: JsonObject) -> Stall | None:
    """A state file from before `stall` was recorded said it only in the reason."""
    reason = str(data.get("reason") or "")
    if data.get("status") != Status.FAILED or "stall" in data:
        return None
    starts = {"no progress": Stall.NO_PROGRESS, "no changes": Stall.NO_CHANGES}
    return next((stall for text, stall in starts.items() if reason.startswith(text)), None)


def _old_infra_kind(data: JsonObject) -> str | None:
    """A state file from before `infra_kind` was recorded: an INFRA attempt's kind
    led its reason (`rate-limit: ...`)."""
    if data.get("status") != Status.INFRA:
        return None
    head = str(data.get("reason") or "").partition(":")[0].strip()
    return head if head and " " not in head else None


@dataclass
class TaskState:
    id: str
    status: Status = Status.PENDING
    reason: str = ""
    base: str | None = None  # pinned at first dispatch: the integration head then
    branch: str | None = None
    slot: str | None = None  # the worktree slot holding this task's work, if any
    agent: str | None = None  # spec override set by `forge retry --agent`
    attempts: list[Attempt] = field(default_factory=list)
    runner: Owner | None = None  # the process running it (RUNNING only)
    merged_commit: str | None = None  # the integration merge commit that landed it
    verified_by: VerifiedBy | None = None  # the verification that landed (or failed) it
    merged_definition: str | None = None  # Task.definition() of the work that merged
    suggestion: str | None = None  # written when escalation is exhausted
    salvage: list[str] = field(default_factory=list)  # refs holding salvaged work
    warnings: list[str] = field(default_factory=list)
    # Best-of-N (forge/run/candidates.py): each candidate's own record, by its unit
    # name `<task>+<n>`; on such a record, `candidate` is its label.
    candidates: dict[str, TaskState] = field(default_factory=dict)
    candidate: str | None = None
    doubted: bool = False  # FAILED by the gate, its evidence pending until the run ends

    @classmethod
    def from_dict(cls, data: JsonObject) -> TaskState:
        names = _field_names(cls)
        nested = ("attempts", "runner", "candidates")
        kwargs = {k: v for k, v in data.items() if k in names and k not in nested}
        ts = cls(**kwargs)
        ts.status, ts.verified_by = Status(ts.status), VerifiedBy.parse(ts.verified_by)
        ts.attempts = [Attempt.from_dict(a) for a in data.get("attempts", [])]
        ts.candidates = {u: cls.from_dict(c) for u, c in (data.get("candidates") or {}).items()}
        runner = data.get("runner")
        ts.runner = Owner.from_dict(runner) if isinstance(runner, dict) else None
        return ts

    def to_dict(self) -> JsonObject:
        # Shallow copies, not dataclasses.asdict: this runs several times per task
        # under the store lock, and asdict's deep copy costs ~35x more.
        return {
            **vars(self),
            "attempts": [attempt_dict(a) for a in self.attempts],
            "verified_by": None if self.verified_by is None else self.verified_by.to_dict(),
            "runner": None if self.runner is None else self.runner.to_dict(),
            "candidates": {u: c.to_dict() for u, c in self.candidates.items()},
        }

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def every_attempt(self) -> list[Attempt]:
        """Its attempts and its candidates' (a best-of-N task's own attempts land a
        candidate's work and carry no cost of their own)."""
        return self.attempts + [a for c in self.candidates.values() for a in c.attempts]


def attempt_dict(attempt: Attempt) -> JsonObject:
    """An attempt's record in the state file's shape."""
    return {**vars(attempt), **records.json_parts(attempt)}


@dataclass
class Slot:
    name: str
    path: str
    task: str | None = None  # the task whose work it holds (None: free)
    setup_done: bool = False
    bytes: int | None = None  # disk use, measured when the last run ended
    clean: bool = False  # holds nothing uncommitted (just made, or its task merged)


@dataclass
class RunState:
    plan: str
    integration: str  # the integration branch's full ref name
    tasks: dict[str, TaskState]
    slots: dict[str, Slot] = field(default_factory=dict)
    verification: VerifyRecord | None = None  # of the integration head, last verified
    paused: str | None = None  # why the last run paused (hold, infrastructure)
    gate: GateRecord | None = None  # the batch under verification, and a landing's intent
    # The gate's verifications, every run's (the oldest go past STEPS_KEPT)
    gate_steps: list[GateStep] = field(default_factory=list)
    # The gate's last verification that landed nothing (INTERRUPTED, or FAIL naming a
    # culprit), and the head's own failures and their fixes: forge/run/gate/story.py
    gate_last: GateLast | None = None
    pre_existing: PreExisting | None = None
    started: str | None = None
    finished: str | None = None
    wall_seconds: float | None = None
    invocations: list[Invocation] = field(default_factory=list)  # every run, the last last
    # What changed in the user's checkout while the last run ran ([] when nothing did)
    touched: list[str] | None = None
    # Not saved: the verification read carries forge's seal (`forge accept` needs it)
    verification_sealed: bool = True

    def record(self, tid: str) -> TaskState:
        """The record of a task, or of one of its candidates (`<task>+<n>`)."""
        ts = self.tasks.get(tid)
        if ts is not None:
            return ts
        return self.tasks[self.owner(tid)].candidates[tid]

    def owner(self, tid: str) -> str:
        """The task whose record holds `tid`'s: itself, or a candidate's task."""
        return tid if tid in self.tasks else task_of_unit(tid)

    def to_dict(self) -> JsonObject:
        # Shallow copies, not dataclasses.asdict: this runs several times per task
        # under the store lock, and asdict's deep copy costs ~35x more.
        return {
            "schema_version": SCHEMA_VERSION,
            "plan": self.plan,
            "integration": self.integration,
            "tasks": {tid: ts.to_dict() for tid, ts in self.tasks.items()},
            **self.plan_wide(),
        }

    def plan_wide(self) -> JsonObject:
        """Everything but the tasks: small, whatever the plan's size."""
        return {
            "slots": {name: dict(vars(slot)) for name, slot in self.slots.items()},
            "verification": (
                None if self.verification is None else seal.sealed(self.verification.to_dict())
            ),
            "paused": self.paused,
            "gate": None if self.gate is None else self.gate.to_dict(),
            "gate_steps": [s.to_dict() for s in self.gate_steps],
            "gate_last": None if self.gate_last is None else self.gate_last.to_dict(),
            "pre_existing": None if self.pre_existing is None else self.pre_existing.to_dict(),
            "started": self.started,
            "finished": self.finished,
            "wall_seconds": self.wall_seconds,
            "invocations": [vars(i) for i in self.invocations],
            "touched": self.touched,
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> RunState:
        return cls(
            plan=data["plan"],
            integration=data["integration"],
            tasks={k: TaskState.from_dict(v) for k, v in data.get("tasks", {}).items()},
            slots={k: Slot(**v) for k, v in data.get("slots", {}).items()},
            verification=_verification(data.get("verification")),
            paused=data.get("paused"),
            gate=GateRecord.from_dict(data["gate"]) if data.get("gate") else None,
            gate_steps=steps_from(data.get("gate_steps")),
            gate_last=GateLast.parse(data.get("gate_last")),
            pre_existing=PreExisting.parse(data.get("pre_existing")),
            started=data.get("started"),
            finished=data.get("finished"),
            wall_seconds=data.get("wall_seconds"),
            invocations=[Invocation(**i) for i in data.get("invocations") or []],
            touched=data.get("touched"),
            verification_sealed=not data.get("verification") or seal.valid(data["verification"]),
        )


def state_problem(data: object) -> str | None:
    """Why `data` is not a run state this forge can read (None: it is)."""
    if not isinstance(data, dict):
        return shape.problem(RunState, data)
    # The verification is a record of its own shape: read as VerifyRecord reads it.
    why = shape.problem(RunState, {k: v for k, v in data.items() if k != "verification"})
    if why:
        return why
    statuses = set(Status)
    for tid, ts in data.get("tasks", {}).items():
        wrong = [ts.get("status", Status.PENDING)] + [
            a.get("status", Status.RUNNING) for a in ts.get("attempts", [])
        ]
        bad = next((s for s in wrong if s not in statuses), None)
        if bad is not None:
            return f"task `{tid}` has the unknown status {bad!r}"
    verification = data.get("verification")
    if verification is not None and not isinstance(verification, dict):
        return "`verification` is not an object"
    try:
        _verification(verification)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"`verification` is not a verification record ({exc})"
    return None


def _verification(data: object) -> VerifyRecord | None:
    return VerifyRecord.from_dict(data) if isinstance(data, dict) and data else None
