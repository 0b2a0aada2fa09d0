"""What forge shows: the results table of a run, `forge status`, a task's history.

Built from the state files alone (no DAG, no GitPython), so `forge status` is fast.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.agents.prices import DEFAULT_PRICES
from forge.base.files import read_json
from forge.base.liveness import Owner
from forge.base.text import one_line, text_table, usd
from forge.commands.candidate_view import candidate_lines, candidate_rows
from forge.errors import ForgeError, StateError
from forge.git import refs, worktrees
from forge.git.repo import Repository, short_sha
from forge.run.attempt.phases import current
from forge.run.gate import story
from forge.run.records.spend import Spend, attempt_usd, cost_usd, per_landed, spend_data
from forge.run.state import hold as holds
from forge.run.state.folders import disk_lines, disk_use, repository_lines, repository_use
from forge.run.state.gate_story import GateLast, PreExisting
from forge.run.state.records import json_parts
from forge.run.state.run_state import UNCOUNTED, RunState, Status, TaskState
from forge.run.state.store import StateStore
from forge.verify.records import VerifyRecord

if TYPE_CHECKING:
    from collections.abc import Mapping

    Prices = Mapping[str, tuple[float, float]]


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


def task_time(ts: TaskState) -> float | None:
    spent = [a.duration for a in ts.attempts if a.duration is not None]
    return sum(spent) if spent else None


def _total(ts: TaskState, key: str) -> Any:
    # (a best-of-N task's: its candidates', losers included)
    values = [getattr(a, key) for a in ts.every_attempt() if getattr(a, key) is not None]
    return sum(values) if values else None


def _best_of(ts: TaskState) -> str:
    return f"best of {len(ts.candidates)}" if ts.candidates else ""


def task_row(ts: TaskState, prices: Prices | None = None) -> dict[str, Any]:
    last = ts.last
    now = current(last) if ts.status == Status.RUNNING else None
    # (a best-of-N task's: its candidates', losers included)
    cost = cost_usd(ts.every_attempt(), DEFAULT_PRICES if prices is None else prices)
    return {
        "id": ts.id,
        "status": str(ts.status),
        # INFRA and INTERRUPTED attempts spent nothing: they are history, not attempts
        "attempts": sum(1 for a in ts.attempts if a.status not in UNCOUNTED),
        "agent": last.agent if last else (ts.agent or _best_of(ts)),
        # The last attempt's time (what the row's status is about); the total over
        # every attempt is `total_seconds`, shown by `forge status TASK`.
        "seconds": last.duration if last else None,
        "total_seconds": task_time(ts),
        "cost_usd": None if cost is None else round(cost, 6),
        "input_tokens": _total(ts, "input_tokens"),
        "output_tokens": _total(ts, "output_tokens"),
        "reason": ts.reason,
        "suggestion": ts.suggestion,
        "salvage": list(ts.salvage),
        "warnings": list(ts.warnings),
        "slot": ts.slot,
        "phase": now.name if now else None,  # what a running task is doing
        "phase_started": now.start if now else None,  # epoch seconds
        # MERGED through the gate: the verification
        "verified_by": None if ts.verified_by is None else ts.verified_by.to_dict(),
        # the failing tests that failed it
        "failures": [f.to_dict() for f in last.failures] if last else [],
        "candidates": candidate_rows(ts, prices),  # best-of-N: each candidate's outcome
    }


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


def status_data(repo: Repository, plan: str, *, disk: bool = False) -> dict[str, Any]:
    """Everything `forge status` shows. Disk use is the figure measured when the last
    run ended, unless `disk` asks to measure now (slow on a large repository)."""
    store = StateStore(repo.state, plan)
    state = store.load_existing()
    recorded = repo.state.read_plan_record(plan)
    try:
        task_ids = [str(t["id"]) for t in recorded["plan"]["tasks"]]
    except (KeyError, TypeError) as exc:
        raise StateError(
            f"recorded plan {repo.state.plan_file(plan)} is not in a form this forge "
            f"understands ({exc!r}); run `forge plan` on its file again"
        ) from None
    if state is None:
        state = store.load(task_ids)
    order = {tid: i for i, tid in enumerate(task_ids)}
    tasks = sorted(state.tasks.values(), key=lambda t: order.get(t.id, len(order)))
    slots = []
    for slot in state.slots.values():
        path = Path(slot.path)
        slots.append(
            {
                "name": slot.name,
                "path": slot.path,
                "task": slot.task,
                "exists": path.exists(),
                "bytes": (
                    worktrees.disk_usage(path) if disk and path.exists() else (slot.bytes or 0)
                ),
                "measured": "now" if disk else "at the end of the last run",
            }
        )
    hold = holds.active(repo.state, plan)
    runner = _runner(repo, plan)
    from forge.plan.repo_config import load_repo_config

    prices = load_repo_config(repo.root).all_prices()
    budget = recorded.get("plan", {}).get("budget")
    return {
        "spend": spend_data(state, prices),
        "budget_usd": budget,
        "plan": plan,
        "source": recorded.get("source_path"),
        "base": recorded.get("base_commit"),
        "integration": state.integration,
        "integration_head": repo.ref_value(state.integration),
        "tasks": [task_row(t, prices) for t in tasks],
        "history": {t.id: _history(t, prices) for t in tasks},
        "verification": None if state.verification is None else state.verification.to_dict(),
        "gate": gate_data(state),
        "slots": slots,
        "hold": hold.describe() if hold else None,
        "paused": state.paused,
        "runner": runner,
        "started": state.started,
        "finished": state.finished,
        "wall_seconds": state.wall_seconds,
        "touched": state.touched,
        "logs": str(repo.state.logs_dir(plan)),
        "combined": recorded.get("combined") or {},
        "disk": disk_use(repo, plan) if disk else None,  # bytes per kind of folder
        # the repository's, all plans and the hooks' checkouts included
        "repository_disk": repository_use(repo) if disk else None,
    }


def gate_data(state: RunState) -> dict[str, Any]:
    """The gate's queue: QUEUED tasks waiting, the batch under verification, and how
    many verifications its bisection may still need."""
    current = state.gate
    batch = current.batch if current else None
    return {
        "queued": [
            t.id
            for t in state.tasks.values()
            if t.status == Status.QUEUED and t.id not in (batch or ())
        ],
        "batch": batch,
        "phase": current.phase if current else None,
        "left": current.left if current else None,
        "doing": current.doing if current else None,  # what runs now, since when
        "since": current.since if current else None,
        "head": current.head if current else None,
        # its last verification that landed nothing
        "last": None if state.gate_last is None else state.gate_last.to_dict(),
        # what the head fails already, and fixes
        "pre_existing": None if state.pre_existing is None else state.pre_existing.to_dict(),
    }


def gate_lines(data: dict[str, Any]) -> list[str]:
    out = []
    if data["batch"]:
        line = f"gate: verifying {', '.join(data['batch'])}"
        if data["phase"] == "bisecting":
            line += f" (bisecting: at most {data['left']} verification(s) left)"
        out.append(line + doing_text(data))
    if data["queued"]:
        out.append(f"queue: {', '.join(data['queued'])}")
    return out


def doing_text(data: dict[str, Any]) -> str:
    """`: running the whole suite on 1a2b3c4d5e6f for 12.0s` (the gate now)."""
    if not data.get("doing"):
        return ""
    since = data.get("since")
    took = f" for {fmt_seconds(time.time() - since)}" if since else ""
    return f": {data['doing']}{took}"


def landed_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Which verification covered each task that landed through the gate, one line
    per verification."""
    by: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for r in rows:
        covered = r["verified_by"]
        if r["status"] == Status.MERGED and covered:
            by.setdefault(str(covered["record"]), (covered, []))[1].append(r["id"])
    return [
        f"landed by verification {record} ({covered.get('summary') or covered['verdict']} on "
        f"{str(covered['commit'])[:12]}): {', '.join(ids)}"
        for record, (covered, ids) in by.items()
    ]


def task_status_data(
    repo: Repository, plan: str, task: str, *, disk: bool = False
) -> dict[str, Any]:
    """`forge status TASK --json`: the task's row and its attempts (`task_data`)."""
    data = status_data(repo, plan, disk=disk)
    _known_task(data, plan, task)
    return task_data(data, task)


def render(repo: Repository, plan: str, task: str | None, *, disk: bool = False) -> str:
    """`forge status` as text: the plan's tasks, or one task's history."""
    data = status_data(repo, plan, disk=disk)
    if task is None:
        return render_status(data)
    _known_task(data, plan, task)
    return render_history(data, task)


def _known_task(data: dict[str, Any], plan: str, task: str) -> None:
    if task not in data["history"]:
        from forge.plan.names import did_you_mean

        ids = list(data["history"])
        raise ForgeError(
            f"plan '{plan}' has no task '{task}'{did_you_mean(task, ids)} (tasks: {', '.join(ids)})"
        )


# Attempt fields recorded after the shape of `status --json` was fixed.
_NOT_SHOWN = frozenset({"infra_kind"})


def _history(ts: TaskState, prices: Prices) -> list[dict[str, Any]]:
    """Each attempt as saved, with `counted`: its number among the attempts that
    spent one (None for INFRA and INTERRUPTED tries), and its cost as the run's
    summary counts it (reported, else priced; `reported_cost_usd` is the CLI's)."""
    out, n = [], 0
    for a in ts.attempts:
        spent = a.status not in UNCOUNTED
        n += spent
        usd = attempt_usd(a, prices)
        out.append(
            {
                **{k: v for k, v in vars(a).items() if k not in _NOT_SHOWN},
                **json_parts(a),
                "counted": n if spent else None,
                "reported_cost_usd": a.cost_usd,
                "cost_usd": None if usd is None else round(usd, 6),
            }
        )
    return out


def _runner(repo: Repository, plan: str) -> str | None:
    try:
        data = read_json(repo.state.plan_dir(plan) / "owner.json", what="lock owner file")
    except FileNotFoundError:
        return None
    owner = Owner.from_dict(data)
    return owner.describe() + ("" if owner.alive() else " (gone)")


def _combined(data: dict[str, Any]) -> list[str]:
    """A plan made by `forge combine`: the plans it holds, at the heads combined."""
    parts = [f"{p} ({short_sha(str(h))})" for p, h in (data.get("combined") or {}).items()]
    return [f"combined from: {', '.join(parts)}"] if parts else []


def render_status(data: dict[str, Any]) -> str:
    out = [
        f"plan {data['plan']}  (base {short_sha(str(data['base']))}, "
        f"integration {_branch_at(data['integration'], data['integration_head'])})"
    ]
    out += _combined(data)
    if data["runner"]:
        out.append(f"running: {data['runner']}")
    if data["hold"]:
        out.append(f"HOLD: {data['hold']}")
    if data["paused"]:
        out.append(f"paused: {data['paused']}")
    rows = []
    for r in data["tasks"]:
        reason = r["reason"] or "; ".join(r["warnings"])
        if r["phase"]:
            reason = f"{r['phase']} for {fmt_seconds(time.time() - r['phase_started'])}"
        rows.append(
            [
                r["id"],
                r["status"],
                str(r["attempts"]),
                r["agent"],
                fmt_seconds(r["seconds"]),
                reason,
            ]
        )
    out.append(_table(["task", "status", "attempts", "agent", "time", "reason"], rows).rstrip())
    for r in data["tasks"]:
        if r["suggestion"]:
            out.append(f"{r['id']}: {r['suggestion']}")
        for ref in r["salvage"]:
            out.append(f"{r['id']}: salvaged work kept in {ref}")
    out += gate_lines(data["gate"])
    out += landed_lines(data["tasks"])
    out += head_and_gate_lines(data)
    out.append(spend_line(data["spend"], data["budget_usd"]))
    if data["slots"]:
        total = sum(s["bytes"] for s in data["slots"])
        when = data["slots"][0]["measured"]
        n = len(data["slots"])
        out.append(f"worktrees ({n} slot{'s' * (n != 1)}, {_bytes(total)} measured {when}):")
        for s in data["slots"]:
            holds_what = f"holds {s['task']}" if s["task"] else "free"
            out.append(f"  {s['name']}: {holds_what}, {_bytes(s['bytes'])}  {s['path']}")
    if not data["runner"]:
        out += [
            f"last run: {line.strip()}" if i == 0 else line
            for i, line in enumerate(touched_lines(data.get("touched")))
        ]
    out += disk_lines(data.get("disk"), _bytes)
    out += repository_lines(data.get("repository_disk"), _bytes)
    out.append(f"logs: {data['logs']}")
    return "\n".join(out) + "\n"


def head_and_gate_lines(data: dict[str, Any]) -> list[str]:
    """The integration head's verdict, and beside it the gate's last verification
    that landed nothing (an interrupted one stands for a head never verified)."""
    last, head = GateLast.parse(data["gate"].get("last")), data["verification"]
    out = []
    if head or not last:
        out += verification_lines(VerifyRecord.from_dict(head) if head else None)
    out += story.pre_existing_lines(PreExisting.parse(data["gate"].get("pre_existing")))
    return out + story.lines(last, head_verified=bool(head))


def _branch_at(ref: str, head: str | None) -> str:
    """`forge/p-integration at 1a2b3c4d5e6f`, or that the branch is gone (after
    `forge clean`), never `at None`."""
    name = refs.branch_name(ref)
    return f"{name} at {short_sha(head)}" if head else f"{name} (no such branch now)"


def spend_line(spend: dict[str, Any], budget: float | None) -> str:
    """`cost: $1.23, 2.1M in / 40.2k out tokens; $0.41 per landed task (budget 20 USD)`."""
    whole = Spend.from_dict(spend)
    text = whole.describe()
    if spend.get("landed"):
        text += f"; {per_landed(whole, int(spend['landed']))}"
    return f"cost: {text}" + (f" (budget {budget:g} USD)" if budget is not None else "")


def task_data(data: dict[str, Any], task: str) -> dict[str, Any]:
    """One task for `forge status TASK --json`: its row (attempt count, cost and
    tokens summed, reviews included) and every attempt in `history`."""
    row = next(r for r in data["tasks"] if r["id"] == task)
    return {"plan": data["plan"], "task": task, **row, "history": data["history"][task]}


def _usage(a: dict[str, Any]) -> str:
    if a.get("cost_usd") is not None:
        return usd(a["cost_usd"], 4)
    if a.get("input_tokens") is not None:
        return f"{a['input_tokens']}/{a.get('output_tokens')} tok"
    return ""


def _review(a: dict[str, Any]) -> str:
    review = a.get("review")
    if not review:
        return "-"
    return f"{review.get('verdict', '?')} ({review.get('agent', '?')})"


def render_history(data: dict[str, Any], task: str) -> str:
    attempts = data["history"].get(task, [])
    row = next(r for r in data["tasks"] if r["id"] == task)
    out = [f"task {task}: {row['status']}" + (f" ({row['reason']})" if row["reason"] else "")]
    if row["status"] != Status.MERGED:  # the failing tests of the verification that failed it
        out += [
            f"  failed in lane {f['lane']}: {f['test'] or f['message']}"
            + (f" ({f['message']})" if f["test"] and f["message"] else "")
            for f in row["failures"][:10]
        ]
    reviewed = any(a.get("review") for a in attempts)
    rows = []
    for a in attempts:
        agent = a["agent"] + (f" [{a['fallback']}]" if a.get("fallback") else "")
        cells = [
            # INFRA and INTERRUPTED tries spent no attempt: no number, as in `attempts`.
            str(a["counted"]) if a.get("counted") else "-",
            agent,
            str(a["status"]),
            str(a.get("started", "")),
            fmt_seconds(a.get("duration")),
            _usage(a),
        ]
        if reviewed:
            cells.append(_review(a))
        said = a.get("reason", "")
        if a.get("model_mismatch") and "model mismatch" not in said:
            said = f"model mismatch: {a['model_mismatch']}" + (f"; {said}" if said else "")
        rows.append([*cells, said])
    headers = ["#", "agent", "status", "started", "time", "cost"]
    headers += ["review"] if reviewed else []
    headers.append("reason")
    if any(a.get("where") for a in attempts):  # a cluster ran some: say where
        headers.insert(3, "where")
        for r, a in zip(rows, attempts, strict=True):
            r.insert(3, a.get("where") or "here")
    out.append(_table(headers, rows).rstrip())
    out += candidate_lines(row["candidates"], fmt_seconds)
    if len(attempts) > 1 and row["total_seconds"] is not None:
        out.append(f"{len(attempts)} tries, {fmt_seconds(row['total_seconds'])} in all")
    if row["cost_usd"] is not None or row["input_tokens"] is not None:
        total = usd(row["cost_usd"], 4) if row["cost_usd"] is not None else "-"
        out.append(f"total: {total}, {row['input_tokens'] or 0}/{row['output_tokens'] or 0} tok")
    if row["suggestion"]:
        out.append(row["suggestion"])
    for ref in row["salvage"]:
        out.append(f"salvaged work kept in {ref}")
    if attempts and attempts[-1].get("log"):
        out.append(f"last log: {attempts[-1]['log']}")
    return "\n".join(out) + "\n"


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


__all__ = ["Status", "render_history", "render_status", "status_data"]


def disk_overview(repo: Repository) -> dict[str, Any]:
    """`forge status --disk` with several plans and none named: each plan's folders
    by kind (a member of the verification pool counted for every plan that used it)
    and the repository's total, each folder once."""
    plans = repo.state.recorded_plans()
    return {
        "plans": {plan: disk_use(repo, plan) for plan in plans},
        "repository_disk": repository_use(repo),
    }


def render_disk_overview(data: dict[str, Any]) -> list[str]:
    uses = data["plans"].items()
    out = [f"{plan}: {line}" for plan, use in uses for line in disk_lines(use, _bytes)]
    return out + repository_lines(data["repository_disk"], _bytes)
