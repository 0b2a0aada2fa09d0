"""The typed rows `forge status` is made of: a task's row, the gate's queue, a
worktree slot, what the recorded plan says of itself. Each is built from the run's
typed state and gives its part of `--json` (`to_dict`); the text reads its fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from forge.agents.prices import DEFAULT_PRICES
from forge.commands.candidate_view import candidate_rows
from forge.errors import StateError
from forge.frozen import frozen
from forge.run.attempt.messages import GOES_AGAIN
from forge.run.attempt.phases import current
from forge.run.records.spend import attempt_usd, cost_usd
from forge.run.state.gate_record import GatePhase
from forge.run.state.gate_story import GateLast, PreExisting
from forge.run.state.records import Failure, VerifiedBy, json_parts
from forge.run.state.run_state import UNCOUNTED, Attempt, RunState, Status, TaskState

if TYPE_CHECKING:
    from pathlib import Path

    from forge.agents.prices import Price

    Prices = Mapping[str, Price]


def task_time(ts: TaskState) -> float | None:
    spent = [a.duration for a in ts.attempts if a.duration is not None]
    return sum(spent) if spent else None


def _tokens(ts: TaskState, tokens: Callable[[Attempt], int | None]) -> int | None:
    # (a best-of-N task's: its candidates', losers included)
    values = [n for n in map(tokens, ts.every_attempt()) if n is not None]
    return sum(values) if values else None


@frozen
class TaskRow:
    """A task's row: its status, attempts that spent one, the last attempt's agent
    and time, the cost and tokens of every attempt, what a running one does now."""

    ts: TaskState
    attempts: int
    agent: str
    seconds: float | None  # the last attempt's (what the row's status is about)
    total_seconds: float | None  # every attempt's, shown by `forge status TASK`
    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None
    phase: str | None  # what a running task is doing
    phase_started: float | None  # since when, epoch seconds
    failures: list[Failure]  # of the verification that failed it
    prices: Prices | None

    @property
    def id(self) -> str:
        return self.ts.id

    @property
    def status(self) -> Status:
        return self.ts.status

    @property
    def reason(self) -> str:
        return self.ts.reason

    @property
    def verified_by(self) -> VerifiedBy | None:
        return self.ts.verified_by

    def to_dict(self) -> dict[str, object]:
        ts = self.ts
        return {
            "id": ts.id,
            "status": str(ts.status),
            "attempts": self.attempts,
            "agent": self.agent,
            "seconds": self.seconds,
            "total_seconds": self.total_seconds,
            "cost_usd": self.cost_usd,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "reason": ts.reason,
            "suggestion": ts.suggestion,
            "salvage": list(ts.salvage),
            "warnings": list(ts.warnings),
            "waiting_for_evidence": ts.doubted and ts.status == Status.FAILED,
            "slot": ts.slot,
            "phase": self.phase,
            "phase_started": self.phase_started,
            # MERGED through the gate: the verification
            "verified_by": None if ts.verified_by is None else ts.verified_by.to_dict(),
            "failures": [f.to_dict() for f in self.failures],
            "candidates": candidate_rows(ts, self.prices),  # best-of-N: each candidate's
        }


def row_of(ts: TaskState, prices: Prices | None = None) -> TaskRow:
    last = ts.last
    now = current(last) if ts.status == Status.RUNNING else None
    # (a best-of-N task's: its candidates', losers included)
    cost = cost_usd(ts.every_attempt(), DEFAULT_PRICES if prices is None else prices)
    best_of = f"best of {len(ts.candidates)}" if ts.candidates else ""
    return TaskRow(
        ts=ts,
        # INFRA and INTERRUPTED attempts spent nothing: they are history, not attempts
        attempts=sum(1 for a in ts.attempts if a.status not in UNCOUNTED),
        agent=last.agent if last else (ts.agent or best_of),
        seconds=last.duration if last else None,
        total_seconds=task_time(ts),
        cost_usd=None if cost is None else round(cost, 6),
        input_tokens=_tokens(ts, lambda a: a.input_tokens),
        output_tokens=_tokens(ts, lambda a: a.output_tokens),
        phase=now.name if now else None,
        phase_started=now.start if now else None,
        failures=list(last.failures) if last else [],
        prices=prices,
    )


def task_row(ts: TaskState, prices: Prices | None = None) -> dict[str, object]:
    """A task's row as `--json` gives it."""
    return row_of(ts, prices).to_dict()


# Attempt fields recorded after the shape of `status --json` was fixed (`lost` is
# said by the candidates' rows).
_NOT_SHOWN = frozenset({"infra_kind", "lost"})


WAITING_FOR_EVIDENCE = "blamed, waiting for evidence"


def shown_status(ts: TaskState) -> str:
    """The status as a view says it: a FAILED task whose blame waits for evidence (its
    failing tests may prove flaky before the run ends) is said so, not FAILED."""
    return WAITING_FOR_EVIDENCE if ts.doubted and ts.status == Status.FAILED else str(ts.status)


def warnings_now(ts: TaskState) -> list[str]:
    """The task's warnings as they read now: a blame given back said that the same
    change goes to the gate again, which is past once the task has landed."""
    if ts.status != Status.MERGED:
        return list(ts.warnings)
    return [w.removesuffix(f"; {GOES_AGAIN}") for w in ts.warnings]


@frozen
class Tried:
    """An attempt as `forge status TASK` lists it: `counted` is its number among the
    attempts that spent one (None for INFRA and INTERRUPTED tries), `cost_usd` its
    cost as the run's summary counts it (reported, else priced). An attempt that
    took a best-of-N candidate's work to the gate has no cost of its own: `spent`
    is then what that candidate spent (its USD, None when unknown, and its tokens)."""

    attempt: Attempt
    counted: int | None
    cost_usd: float | None
    spent: CandidateSpend | None = None

    def to_dict(self) -> dict[str, object]:
        a = self.attempt
        return {
            **{k: v for k, v in vars(a).items() if k not in _NOT_SHOWN},
            **json_parts(a),
            "counted": self.counted,
            "reported_cost_usd": a.cost_usd,  # the CLI's
            "cost_usd": self.cost_usd,
            "candidate_spend": None if self.spent is None else self.spent.to_dict(),
        }


@frozen
class CandidateSpend:
    """What the candidate whose work an attempt lands spent, over its own attempts."""

    usd: float | None
    input_tokens: int
    output_tokens: int

    def to_dict(self) -> dict[str, object]:
        return {
            "cost_usd": self.usd,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


def tried(ts: TaskState, prices: Prices) -> list[Tried]:
    out, n = [], 0
    for a in ts.attempts:
        spent = a.status not in UNCOUNTED
        n += spent
        usd = attempt_usd(a, prices)
        own = None if usd is None else round(usd, 6)
        out.append(Tried(a, n if spent else None, own, _candidate_spend(ts, a, prices)))
    return out


def _candidate_spend(ts: TaskState, a: Attempt, prices: Prices) -> CandidateSpend | None:
    """The spend of the candidate whose work `a` lands (its label and commit)."""
    if a.candidate is None:
        return None
    from forge.run.records.spend import spend_of

    for cts in ts.candidates.values():
        if cts.candidate == a.candidate and any(c.commit == a.commit for c in cts.attempts):
            spend = spend_of(cts.attempts, prices)
            usd = round(spend.usd, 6) if spend.priced and not spend.unpriced else None
            return CandidateSpend(usd, spend.input_tokens, spend.output_tokens)
    return None


@frozen
class GateView:
    """The gate's queue: QUEUED tasks waiting, the batch under verification, and how
    many verifications its bisection may still need."""

    queued: list[str]
    batch: list[str] | None = None
    phase: GatePhase | None = None
    left: int | None = None
    doing: str | None = None  # what runs now
    since: float | None = None  # since when
    head: str | None = None
    last: GateLast | None = None  # its last verification that landed nothing
    pre_existing: PreExisting | None = None  # what the head fails already, and fixes

    def to_dict(self) -> dict[str, object]:
        return {
            "queued": list(self.queued),
            "batch": self.batch,
            "phase": self.phase,
            "left": self.left,
            "doing": self.doing,
            "since": self.since,
            "head": self.head,
            "last": None if self.last is None else self.last.to_dict(),
            "pre_existing": None if self.pre_existing is None else self.pre_existing.to_dict(),
        }


def gate_view(state: RunState) -> GateView:
    gate = state.gate
    batch = gate.batch if gate else None
    queued = [
        t.id
        for t in state.tasks.values()
        if t.status == Status.QUEUED and t.id not in (batch or ())
    ]
    last, pre_existing = state.gate_last, state.pre_existing
    if gate is None:
        return GateView(queued, last=last, pre_existing=pre_existing)
    return GateView(
        queued, batch, gate.phase, gate.left, gate.doing, gate.since, gate.head, last, pre_existing
    )


@frozen
class SlotRow:
    """A worktree slot: the task whose work it holds, its disk use and when measured."""

    name: str
    path: str
    task: str | None
    exists: bool
    bytes: int
    measured: str

    def to_dict(self) -> dict[str, object]:
        return dict(vars(self))


@frozen
class PlanRecord:
    """What `forge status` reads of the recorded plan (its JSON, not the plan: no DAG)."""

    task_ids: list[str]
    budget: float | None
    source: str | None
    base: str | None
    combined: dict[str, str]  # a plan made by `forge combine`: plan -> head combined


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _at(value: object, key: str) -> object:
    """`value[key]`, failing as Python's own subscription of a JSON value does."""
    if isinstance(value, Mapping):
        return value[key]
    if isinstance(value, list | tuple):
        raise TypeError(f"{type(value).__name__} indices must be integers or slices, not str")
    if isinstance(value, str):
        raise TypeError("string indices must be integers, not 'str'")
    raise TypeError(f"'{type(value).__name__}' object is not subscriptable")


def _items(value: object) -> Iterable[object]:
    if isinstance(value, Iterable):
        return value
    raise TypeError(f"'{type(value).__name__}' object is not iterable")


def plan_record(data: object, file: Path) -> PlanRecord:
    try:
        task_ids = [str(_at(t, "id")) for t in _items(_at(_at(data, "plan"), "tasks"))]
    except (KeyError, TypeError) as exc:
        raise StateError(
            f"recorded plan {file} is not in a form this forge "
            f"understands ({exc!r}); run `forge plan` on its file again"
        ) from None
    record = data if isinstance(data, Mapping) else {}
    plan = record.get("plan")
    budget = plan.get("budget") if isinstance(plan, Mapping) else None
    combined = record.get("combined")
    return PlanRecord(
        task_ids=task_ids,
        budget=budget if isinstance(budget, int | float) else None,
        source=_text(record.get("source_path")),
        base=_text(record.get("base_commit")),
        combined=(
            {str(p): str(h) for p, h in combined.items()} if isinstance(combined, Mapping) else {}
        ),
    )
