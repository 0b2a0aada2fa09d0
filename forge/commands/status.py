"""What forge shows: the results table of a run, `forge status`, a task's history.

Built from the state files alone (no DAG, no GitPython), so `forge status` is fast.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from forge.base.files import read_json
from forge.base.liveness import Owner
from forge.base.text import one_line, text_table, usd
from forge.commands.candidate_view import candidate_lines, candidate_rows
from forge.commands.status_rows import (
    GateView,
    PlanRecord,
    SlotRow,
    TaskRow,
    Tried,
    gate_view,
    plan_record,
    row_of,
    shown_status,
    task_row,
    tried,
    warnings_now,
)
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git import refs, worktrees
from forge.git.repo import Repository, short_sha
from forge.host import record as pr_record
from forge.host.record import PrRecord
from forge.run.gate import story
from forge.run.records.spend import Spend, per_landed, spend_data
from forge.run.state import hold as holds
from forge.run.state.folders import disk_lines, disk_use, repository_lines, repository_use
from forge.run.state.run_state import RunState, Status
from forge.run.state.store import StateStore
from forge.verify.records import VerifyRecord

if TYPE_CHECKING:
    from collections.abc import Mapping

    from forge.agents.prices import Price
    from forge.run.state.records import VerifiedBy
    from forge.run.state.run_state import Attempt

    Prices = Mapping[str, Price]
    SpendData = Mapping[str, float | int | None]


def _table(headers: list[str], rows: list[list[str]]) -> str:
    # A cell on one line whatever a task's reason holds: the columns stay columns.
    return "\n".join(text_table(headers, [[one_line(c) for c in row] for row in rows])) + "\n"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def touched_lines(touched: list[str] | None) -> list[str]:
    """The measured answer to "did the run touch my checkout?" (None: not measured)."""
    if touched is None:
        return []
    if not touched:
        return ["your branch, index and working tree were not touched"]
    return ["your repository changed while the run ran:"] + [f"  {line}" for line in touched]


def verification_lines(record: VerifyRecord | None) -> list[str]:
    if record is None:
        return ["verification: not run"]
    cached = " (remembered verdict: this tree was verified before)" if record.cached else ""
    lines = [f"verification: {record.summary} on {short_sha(record.commit)}{cached}"]
    for lane in record.lanes:
        lines += [f"  {line}" for line in lane.lines()]
    return lines


@frozen
class StatusView:
    """Everything `forge status` shows, read from the run state and the recorded plan."""

    plan: str
    state: RunState
    recorded: PlanRecord
    rows: list[TaskRow]  # in the plan's order
    prices: Prices
    integration_head: str | None
    slots: list[SlotRow]
    hold: str | None
    runner: str | None
    logs: Path
    disk: dict[str, int] | None = None  # bytes per kind of folder
    repository_disk: dict[str, int] | None = None  # all plans and the hooks' checkouts
    pull_request: PrRecord | None = None  # as `forge pr` last fetched it
    stack: dict[str, PrRecord] | None = None  # `forge pr --per-task`: each task's

    @property
    def gate(self) -> GateView:
        return gate_view(self.state)

    def spend(self) -> SpendData:
        return spend_data(self.state, self.prices)

    def row(self, task: str) -> TaskRow:
        return next(r for r in self.rows if r.id == task)

    def history(self, task: str) -> list[Tried]:
        return tried(self.row(task).ts, self.prices)

    def to_dict(self) -> dict[str, object]:
        state, recorded = self.state, self.recorded
        return {
            "spend": self.spend(),
            "budget_usd": recorded.budget,
            "plan": self.plan,
            "source": recorded.source,
            "base": recorded.base,
            "integration": state.integration,
            "integration_head": self.integration_head,
            "tasks": [r.to_dict() for r in self.rows],
            "history": {r.id: [t.to_dict() for t in self.history(r.id)] for r in self.rows},
            "verification": None if state.verification is None else state.verification.to_dict(),
            "gate": self.gate.to_dict(),
            "slots": [s.to_dict() for s in self.slots],
            "hold": self.hold,
            "paused": state.paused,
            "runner": self.runner,
            "started": state.started,
            "finished": state.finished,
            "wall_seconds": state.wall_seconds,
            "touched": state.touched,
            "logs": str(self.logs),
            "combined": dict(recorded.combined),
            "disk": self.disk,
            "repository_disk": self.repository_disk,
            "pull_request": None if self.pull_request is None else self.pull_request.to_dict(),
            "stacked_pull_requests": [
                {"task": task, **rec.to_dict()} for task, rec in (self.stack or {}).items()
            ],
        }


def status_view(repo: Repository, plan: str, *, disk: bool = False) -> StatusView:
    """Disk use is the figure measured when the last run ended, unless `disk` asks to
    measure now (slow on a large repository)."""
    store = StateStore(repo.state, plan)
    state = store.load_existing()
    recorded = plan_record(repo.state.read_plan_record(plan), repo.state.plan_file(plan))
    if state is None:
        state = store.load(recorded.task_ids)
    order = {tid: i for i, tid in enumerate(recorded.task_ids)}
    tasks = sorted(state.tasks.values(), key=lambda t: order.get(t.id, len(order)))
    hold = holds.active(repo.state, plan)
    from forge.plan.repo_config import load_repo_config

    prices = load_repo_config(repo.root).all_prices()
    return StatusView(
        plan=plan,
        state=state,
        recorded=recorded,
        rows=[row_of(t, prices) for t in tasks],
        prices=prices,
        integration_head=repo.ref_value(state.integration),
        slots=_slots(state, disk=disk),
        hold=hold.describe() if hold else None,
        runner=_runner(repo, plan),
        logs=repo.state.logs_dir(plan),
        disk=disk_use(repo, plan) if disk else None,
        repository_disk=repository_use(repo) if disk else None,
        pull_request=pr_record.load(repo.state, plan),
        stack=pr_record.load_stack(repo.state, plan),
    )


def _slots(state: RunState, *, disk: bool) -> list[SlotRow]:
    out = []
    for slot in state.slots.values():
        path = Path(slot.path)
        exists = path.exists()
        size = worktrees.disk_usage(path) if disk and exists else (slot.bytes or 0)
        measured = "now" if disk else "at the end of the last run"
        out.append(SlotRow(slot.name, slot.path, slot.task, exists, size, measured))
    return out


def status_data(repo: Repository, plan: str, *, disk: bool = False) -> dict[str, object]:
    """Everything `forge status --json` shows."""
    return status_view(repo, plan, disk=disk).to_dict()


def gate_lines(gate: GateView) -> list[str]:
    out = []
    if gate.batch:
        line = f"gate: verifying {', '.join(gate.batch)}"
        if gate.phase == "bisecting":
            line += f" (bisecting: at most {gate.left} verification(s) left)"
        out.append(line + doing_text(gate))
    if gate.queued:
        out.append(f"queue: {', '.join(gate.queued)}")
    return out


def doing_text(gate: GateView) -> str:
    """`: running the whole suite on 1a2b3c4d5e6f for 12.0s` (the gate now)."""
    if not gate.doing:
        return ""
    took = f" for {fmt_seconds(time.time() - gate.since)}" if gate.since else ""
    return f": {gate.doing}{took}"


def landed_lines(rows: list[TaskRow]) -> list[str]:
    """Which verification covered each task that landed through the gate, one line
    per verification."""
    by: dict[str, tuple[VerifiedBy, list[str]]] = {}
    for r in rows:
        covered = r.verified_by
        if r.status == Status.MERGED and covered:
            by.setdefault(str(covered.record), (covered, []))[1].append(r.id)
    return [
        f"landed by verification {record} ({covered.summary or covered.verdict} on "
        f"{str(covered.commit)[:12]}): {', '.join(ids)}"
        for record, (covered, ids) in by.items()
    ]


def task_status_data(
    repo: Repository, plan: str, task: str, *, disk: bool = False
) -> dict[str, object]:
    """`forge status TASK --json`: the task's row (attempt count, cost and tokens
    summed, reviews included) and every attempt in `history`."""
    view = status_view(repo, plan, disk=disk)
    _known_task(view, task)
    history = [t.to_dict() for t in view.history(task)]
    return {"plan": plan, "task": task, **view.row(task).to_dict(), "history": history}


def render(repo: Repository, plan: str, task: str | None, *, disk: bool = False) -> str:
    """`forge status` as text: the plan's tasks, or one task's history."""
    view = status_view(repo, plan, disk=disk)
    if task is None:
        return render_status(view)
    _known_task(view, task)
    return render_history(view, task)


def _known_task(view: StatusView, task: str) -> None:
    ids = [r.id for r in view.rows]
    if task not in ids:
        from forge.plan.names import did_you_mean

        raise ForgeError(
            f"plan '{view.plan}' has no task '{task}'{did_you_mean(task, ids)} "
            f"(tasks: {', '.join(ids)})"
        )


def _runner(repo: Repository, plan: str) -> str | None:
    try:
        data = read_json(repo.state.plan_dir(plan) / "owner.json", what="lock owner file")
    except FileNotFoundError:
        return None
    owner = Owner.from_dict(data)
    return owner.describe() + ("" if owner.alive() else " (gone)")


def _combined(combined: Mapping[str, str]) -> list[str]:
    """A plan made by `forge combine`: the plans it holds, at the heads combined."""
    parts = [f"{p} ({short_sha(h)})" for p, h in combined.items()]
    return [f"combined from: {', '.join(parts)}"] if parts else []


def _task_table(rows: list[TaskRow]) -> str:
    table = []
    for r in rows:
        reason = r.reason or "; ".join(warnings_now(r.ts))
        if r.phase and r.phase_started is not None:
            reason = f"{r.phase} for {fmt_seconds(time.time() - r.phase_started)}"
        table.append(
            [r.id, shown_status(r.ts), str(r.attempts), r.agent, fmt_seconds(r.seconds), reason]
        )
    return _table(["task", "status", "attempts", "agent", "time", "reason"], table).rstrip()


def render_status(view: StatusView) -> str:
    state = view.state
    out = [
        f"plan {view.plan}  (base {short_sha(str(view.recorded.base))}, "
        f"integration {_branch_at(state.integration, view.integration_head)})"
    ]
    out += _combined(view.recorded.combined)
    if view.runner:
        out.append(f"running: {view.runner}")
    if view.hold:
        out.append(f"HOLD: {view.hold}")
    if state.paused:
        out.append(f"paused: {state.paused}")
    out.append(_task_table(view.rows))
    for r in view.rows:
        if r.ts.suggestion:
            out.append(f"{r.id}: {r.ts.suggestion}")
        for ref in r.ts.salvage:
            out.append(f"{r.id}: salvaged work kept in {ref}")
    out += gate_lines(view.gate)
    out += landed_lines(view.rows)
    out += head_and_gate_lines(state)
    out.append(spend_line(view.spend(), view.recorded.budget))
    out += pr_lines(view.pull_request)
    out += [f"stacked pull request of {t}: {r.summary()}" for t, r in (view.stack or {}).items()]
    out += _slot_lines(view.slots)
    if not view.runner:
        out += [
            f"last run: {line.strip()}" if i == 0 else line
            for i, line in enumerate(touched_lines(state.touched))
        ]
    out += disk_lines(view.disk, _bytes)
    out += repository_lines(view.repository_disk, _bytes)
    out.append(f"logs: {view.logs}")
    return "\n".join(out) + "\n"


def pr_lines(record: PrRecord | None) -> list[str]:
    """The pull request as `forge pr` last fetched it, and how long ago (offline)."""
    if record is None:
        return []
    out = [f"pull request {record.summary()}  (fetched {record.age()} ago; {record.url or ''})"]
    if record.state == "merged":
        out.append(f"  merged into {record.base} by the host: the plan's work is accepted")
    now = [v for v in record.verdicts if v.commit == record.pushed]
    out += [f"  FAIL {v.lane} on {short_sha(v.commit)}: {v.summary} {v.url}" for v in now]
    return out


def _slot_lines(slots: list[SlotRow]) -> list[str]:
    if not slots:
        return []
    total = sum(s.bytes for s in slots)
    n = len(slots)
    out = [f"worktrees ({n} slot{'s' * (n != 1)}, {_bytes(total)} measured {slots[0].measured}):"]
    for s in slots:
        holds_what = f"holds {s.task}" if s.task else "free"
        out.append(f"  {s.name}: {holds_what}, {_bytes(s.bytes)}  {s.path}")
    return out


def head_and_gate_lines(state: RunState) -> list[str]:
    """The integration head's verdict, and beside it the gate's last verification
    that landed nothing (an interrupted one stands for a head never verified)."""
    last, head = state.gate_last, state.verification
    out = []
    if head or not last:
        out += verification_lines(head)
    out += story.pre_existing_lines(state.pre_existing)
    return out + story.lines(last, head_verified=bool(head))


def _branch_at(ref: str, head: str | None) -> str:
    """`forge/p-integration at 1a2b3c4d5e6f`, or that the branch is gone (after
    `forge clean`), never `at None`."""
    name = refs.branch_name(ref)
    return f"{name} at {short_sha(head)}" if head else f"{name} (no such branch now)"


def spend_line(spend: SpendData, budget: float | None) -> str:
    """`cost: $1.23, 2.1M in / 40.2k out tokens; $0.41 per landed task (budget 20 USD)`."""
    whole = Spend.from_dict(dict(spend))
    text = whole.describe()
    landed = spend.get("landed")
    if landed:
        text += f"; {per_landed(whole, int(landed), int(spend.get('landed_by_agents') or 0))}"
    return f"cost: {text}" + (f" (budget {budget:g} USD)" if budget is not None else "")


def _usage(t: Tried) -> str:
    a = t.attempt
    if t.cost_usd is not None:
        return usd(t.cost_usd, 4)
    if a.input_tokens is not None:
        return f"{a.input_tokens}/{a.output_tokens} tok"
    if t.spent is not None:  # the candidate's spend, counted on its own row
        said = usd(t.spent.usd, 4) if t.spent.usd is not None else "unknown"
        return f"{said}, {t.spent.input_tokens}/{t.spent.output_tokens} tok (candidate's)"
    return ""


def _review(a: Attempt) -> str:
    review = a.review
    if review is None:
        return "-"
    return f"{review.verdict} ({review.agent})"


def _failure_lines(row: TaskRow) -> list[str]:
    """The failing tests of the verification that failed a task not landed."""
    if row.status == Status.MERGED:
        return []
    return [
        f"  failed in lane {f.lane}: {f.test or f.message}"
        + (f" ({f.message})" if f.test and f.message else "")
        for f in row.failures[:10]
    ]


def _attempt_cells(t: Tried, *, reviewed: bool) -> list[str]:
    a = t.attempt
    cells = [
        # INFRA and INTERRUPTED tries spent no attempt: no number, as in `attempts`.
        str(t.counted) if t.counted else "-",
        a.agent + (f" [{a.fallback}]" if a.fallback else ""),
        str(a.status),
        str(a.started),
        fmt_seconds(a.duration),
        _usage(t),
    ]
    if reviewed:
        cells.append(_review(a))
    said = a.reason
    if a.model_mismatch and "model mismatch" not in said:
        said = f"model mismatch: {a.model_mismatch}" + (f"; {said}" if said else "")
    return [*cells, said]


def render_history(view: StatusView, task: str) -> str:
    attempts = view.history(task)
    row = view.row(task)
    out = [f"task {task}: {row.status}" + (f" ({row.reason})" if row.reason else "")]
    out += _failure_lines(row)
    reviewed = any(t.attempt.review for t in attempts)
    rows = [_attempt_cells(t, reviewed=reviewed) for t in attempts]
    headers = ["#", "agent", "status", "started", "time", "cost"]
    headers += ["review"] if reviewed else []
    headers.append("reason")
    if any(t.attempt.where for t in attempts):  # a cluster ran some: say where
        headers.insert(3, "where")
        for r, t in zip(rows, attempts, strict=True):
            r.insert(3, t.attempt.where or "here")
    out.append(_table(headers, rows).rstrip())
    out += candidate_lines(candidate_rows(row.ts, view.prices), fmt_seconds)
    if len(attempts) > 1 and row.total_seconds is not None:
        out.append(f"{len(attempts)} tries, {fmt_seconds(row.total_seconds)} in all")
    if row.cost_usd is not None or row.input_tokens is not None:
        total = usd(row.cost_usd, 4) if row.cost_usd is not None else "-"
        out.append(f"total: {total}, {row.input_tokens or 0}/{row.output_tokens or 0} tok")
    if row.ts.suggestion:
        out.append(row.ts.suggestion)
    for ref in row.ts.salvage:
        out.append(f"salvaged work kept in {ref}")
    if attempts and attempts[-1].attempt.log:
        out.append(f"last log: {attempts[-1].attempt.log}")
    return "\n".join(out) + "\n"


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


__all__ = ["Status", "render_history", "render_status", "status_data", "task_row"]


class DiskOverview(TypedDict):
    """`forge status --disk --json` with several plans and none named."""

    plans: dict[str, dict[str, int]]  # each plan's folders: bytes by kind
    repository_disk: dict[str, int]


def disk_overview(repo: Repository) -> DiskOverview:
    """Each plan's folders by kind (a member of the verification pool counted for
    every plan that used it) and the repository's total, each folder once."""
    plans = repo.state.recorded_plans()
    return {
        "plans": {plan: disk_use(repo, plan) for plan in plans},
        "repository_disk": repository_use(repo),
    }


def render_disk_overview(data: DiskOverview) -> list[str]:
    uses = data["plans"].items()
    out = [f"{plan}: {line}" for plan, use in uses for line in disk_lines(use, _bytes)]
    return out + repository_lines(data["repository_disk"], _bytes)
