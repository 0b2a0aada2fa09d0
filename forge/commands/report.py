"""`forge report`: one self-contained HTML page of a plan's run.

The DAG by wave with each task's status; a timeline of every attempt per slot,
split into its phases (whatever phases the attempt recorded: the list is data),
and of the verification (its lanes; batches and bisection steps when the record
carries `steps`); per task its attempts with agent, time, cost and links to the
logs; the totals and the verdict. Inline CSS and SVG only: no script, no network,
it opens from a file:// URL, and links to logs are relative to the page.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

from forge.base import outfiles
from forge.commands import report_svg as svg
from forge.commands.report_page import PAGE
from forge.commands.status import fmt_seconds
from forge.git.repo import Repository
from forge.plan.registry import Recorded
from forge.run.spend import Spend, attempt_spend, plan_spend
from forge.run.state.run_state import Attempt, RunState, StateStore, Status
from forge.verify.records import Verdict

WORK_PHASES = ("agent", "run")  # the phases that are the task's own work ("agent time")


@dataclass(frozen=True)
class Page:
    html: str
    path: Path


def default_path(repo: Repository, plan: str) -> Path:
    return repo.state.plan_dir(plan) / "report.html"


def build(
    repo: Repository,
    recorded: Recorded,
    *,
    out: Path | None = None,
    prices: dict[str, tuple[float, float]] | None = None,
) -> Page:
    """The page for `recorded`'s run, to be written at `out` (links are relative to it)."""
    plan = recorded.plan
    path = (out or default_path(repo, plan.name)).resolve()
    store = StateStore(repo.state, plan.name)
    state = store.load_existing() or store.load([t.id for t in plan.tasks])
    html = render(recorded, state, folder=path.parent, prices=prices or {})
    return Page(html, path)


def write(page: Page) -> Path:
    """Only where a regular file belongs: a directory or device is refused as it is."""
    outfiles.write_text(page.path, page.html)
    return page.path


# -- the page ------------------------------------------------------------------


def render(
    recorded: Recorded,
    state: RunState,
    *,
    folder: Path,
    prices: dict[str, tuple[float, float]],
) -> str:
    plan = recorded.plan
    wave_of = {tid: n for n, wave in enumerate(recorded.waves, start=1) for tid in wave}
    spend = plan_spend(state, prices)
    record = _record(state)
    verdict = (record or {}).get("verdict") or "not verified"
    statuses = {tid: str(ts.status) for tid, ts in state.tasks.items()}
    tips = {
        t.id: f"{t.id}: {statuses.get(t.id, 'PENDING')}"
        + (
            f" ({state.tasks[t.id].reason})"
            if t.id in state.tasks and state.tasks[t.id].reason
            else ""
        )
        + (f"\n{t.title}" if t.title else "")
        for t in plan.tasks
    }
    dag = svg.dag_svg(
        [list(w) for w in recorded.waves], {t.id: list(t.deps) for t in plan.tasks}, statuses, tips
    )
    lanes, span, phases = timeline(state)
    body = [
        _header(plan.name, state, spend, verdict, recorded),
        '<section><h2>Tasks by wave</h2><div class="scroll">',
        dag,
        "</div>",
        svg.legend(sorted({*statuses.values()}), dict(svg.STATUS_COLORS)),
        "</section>",
        '<section><h2>Timeline</h2><p class="note">each attempt in the slot it ran in, '
        "split into its phases; then the verification, a row per lane</p>",
        '<div class="scroll">',
        svg.timeline_svg(lanes, span) if lanes else "<p>nothing has run yet</p>",
        "</div>",
        svg.legend(phases),
        "</section>",
        _verification(record, folder),
        _task_table(recorded, state, wave_of, folder, prices),
    ]
    return PAGE.format(title=escape(f"forge report: {plan.name}"), body="\n".join(body))


def _record(state: RunState) -> dict[str, Any] | None:
    """The last verification as data, with the gate's verifications of the run
    (batches, bisection, speculation) as its `steps`."""
    if state.verification is None:
        return None
    data = state.verification.to_dict()
    if state.gate_steps:
        data["steps"] = list(state.gate_steps)
    return data


def _header(name: str, state: RunState, spend: Spend, verdict: str, recorded: Recorded) -> str:
    counts: dict[str, int] = {}
    for ts in state.tasks.values():
        counts[str(ts.status)] = counts.get(str(ts.status), 0) + 1
    agent_time = sum(
        _phase_seconds(a, WORK_PHASES) for ts in state.tasks.values() for a in ts.attempts
    )
    cls = (
        "pass"
        if verdict in (Verdict.PASS, Verdict.FLAKY)
        else "fail"
        if verdict in (Verdict.FAIL, Verdict.INTERRUPTED)
        else "none"
    )
    facts = [
        ("tasks", ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))),
        ("wall time", fmt_seconds(state.wall_seconds)),
        ("agent time", fmt_seconds(agent_time)),
        ("cost", spend.describe()),
        ("base", f"{recorded.base_ref} @ {recorded.base_commit[:12]}"),
        ("integration", state.integration.removeprefix("refs/heads/")),
        ("run", f"{state.started or '-'} \u2192 {state.finished or 'not finished'}"),
    ]
    if state.paused:
        facts.append(("paused", state.paused))
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    return (
        f'<header><h1>{escape(name)} <span class="verdict v-{cls}">{escape(str(verdict))}'
        f'</span></h1><table class="facts">{rows}</table></header>'
    )


def _phase_seconds(attempt: Attempt, names: tuple[str, ...]) -> float:
    if not attempt.phases:  # recorded before phases were: the whole attempt is work
        return attempt.duration or 0.0
    return float(
        sum((p["end"] or p["start"]) - p["start"] for p in attempt.phases if p.get("name") in names)
    )


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def _attempt_bars(attempt: Attempt) -> list[tuple[float, float, str]]:
    """(start, end, phase) in epoch seconds; one `attempt` bar when no phases were kept."""
    if attempt.phases:
        last_end = max((p.get("end") or p["start"]) for p in attempt.phases)
        return [(p["start"], p.get("end") or last_end, str(p["name"])) for p in attempt.phases]
    start = _epoch(attempt.started)
    if start is None:
        return []
    return [(start, start + (attempt.duration or 0.0), "attempt")]


def timeline(state: RunState) -> tuple[list[svg.Lane], float, list[str]]:
    """Lanes (a slot each, then the verification's lanes), the span in seconds, and
    the phase names that appear, in the order they first do."""
    raw: list[tuple[str, str, Attempt, list[tuple[float, float, str]]]] = []
    for tid, ts in state.tasks.items():
        for attempt in ts.attempts:
            bars = _attempt_bars(attempt)
            if bars:
                raw.append((attempt.slot or ts.slot or tid, tid, attempt, bars))
    work_ends = [b[1] for *_, bars in raw for b in bars]
    verify_bars = _verification_bars(_record(state), after=max(work_ends, default=None))
    starts = [b[0] for *_, bars in raw for b in bars] + [
        b[0] for _, bars in verify_bars for b in bars
    ]
    if not starts:
        return [], 0.0, []
    origin = min(starts)
    ends = [b[1] for *_, bars in raw for b in bars] + [
        b[1] for _, bars in verify_bars for b in bars
    ]
    lanes: dict[str, svg.Lane] = {}
    phases: list[str] = []
    for slot, tid, attempt, bars in sorted(raw, key=lambda r: r[3][0][0]):
        lane = lanes.setdefault(slot, svg.Lane(slot))
        widest = max(range(len(bars)), key=lambda i: bars[i][1] - bars[i][0])
        for i, (start, end, name) in enumerate(bars):
            if name not in phases:
                phases.append(name)
            tip = (
                f"{tid} attempt {attempt.number} ({attempt.agent}): {name} "
                f"{fmt_seconds(end - start)}; {attempt.status}"
                + (f": {attempt.reason}" if attempt.reason else "")
            )
            lane.bars.append(
                svg.Bar(
                    start - origin,
                    end - origin,
                    name,
                    tip,
                    f"#task-{tid}",
                    label=tid if i == widest else "",
                )
            )
    out = sorted(lanes.values(), key=lambda lane: _natural(lane.name))
    for name, bars in verify_bars:
        lane = svg.Lane(f"verify: {name}")
        for start, end, kind in bars:
            if kind not in phases:
                phases.append(kind)
            lane.bars.append(svg.Bar(start - origin, end - origin, kind, f"{name}: {kind}"))
        out.append(lane)
    return out, max(ends) - origin, phases


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return head, int(tail) if tail else -1


def _verification_bars(
    record: dict[str, Any] | None, *, after: float | None
) -> list[tuple[str, list[tuple[float, float, str]]]]:
    """A row per lane, its runs one after another from the record's start; then the
    record's `steps` (batches, bisection), each {"name", "start", "end"} in epoch
    seconds, a row per step name."""
    if not record or record.get("cached"):
        return []
    start = _epoch(record.get("started"))
    if start is None:
        return []
    if after is not None and start <= after < start + 1:
        # The record keeps whole seconds; a verification that started in the second
        # the last attempt ended started after it.
        start = after
    rows: list[tuple[str, list[tuple[float, float, str]]]] = []
    for lane, data in (record.get("lanes") or {}).items():
        t = start
        bars = []
        for run in data.get("runs", []):
            duration = float(run.get("duration") or 0.0)
            bars.append((t, t + duration, str(run.get("kind", "run"))))
            t += duration
        rows.append((str(lane), bars))
    steps: dict[str, list[tuple[float, float, str]]] = {}
    for step in record.get("steps") or []:
        if isinstance(step, dict) and isinstance(step.get("start"), int | float):
            end = step.get("end") or step["start"]
            name = str(step.get("name", "step"))
            steps.setdefault(name, []).append((float(step["start"]), float(end), name))
    rows += list(steps.items())
    return rows


def _log_link(log: str | None, folder: Path, label: str) -> str:
    if not log:
        return ""
    href = os.path.relpath(log, folder)
    return f'<a href="{escape(href)}">{escape(label)}</a>'


def _attempt_logs(attempt: Attempt, folder: Path) -> str:
    links = []
    if attempt.log:
        log_dir = Path(attempt.log).parent
        for name in ("setup.log", "agent.log", "check.log", "merge.log", "prompt.md"):
            candidate = log_dir / name
            if candidate.exists() or str(candidate) == attempt.log:
                links.append(_log_link(str(candidate), folder, name.split(".")[0]))
    return " ".join(links)


def _usage(attempt: Attempt, prices: dict[str, tuple[float, float]]) -> str:
    spend = attempt_spend(attempt, prices)
    parts = []
    if attempt.cost_usd is not None or spend.usd:
        parts.append(f"${spend.usd:.4f}" + ("" if attempt.cost_usd is not None else " (priced)"))
    if attempt.input_tokens is not None or attempt.output_tokens is not None:
        parts.append(f"{attempt.input_tokens or 0}/{attempt.output_tokens or 0} tok")
    return ", ".join(parts) or "-"


def _task_table(
    recorded: Recorded,
    state: RunState,
    wave_of: dict[str, int],
    folder: Path,
    prices: dict[str, tuple[float, float]],
) -> str:
    rows = []
    for task in recorded.plan.tasks:
        ts = state.tasks.get(task.id)
        status = str(ts.status) if ts else Status.PENDING
        attempts = ts.attempts if ts else []
        reason = ts.reason if ts else ""
        span = max(1, len(attempts))
        first = (
            f'<tr id="task-{escape(task.id)}" class="first"><td rowspan="{span}">'
            f'<span class="dot" style="background:{svg.status_color(status)}"></span>'
            f'<b>{escape(task.id)}</b><div class="title">{escape(task.title)}</div></td>'
            f'<td rowspan="{span}">{wave_of.get(task.id, "-")}</td>'
            f'<td rowspan="{span}">{escape(status)}'
            + (f'<div class="reason">{escape(reason)}</div>' if reason else "")
            + "</td>"
        )
        if not attempts:
            rows.append(first + '<td colspan="6" class="none">no attempt</td></tr>')
            continue
        for n, a in enumerate(attempts):
            cells = (
                f"<td>{a.number}</td><td>{escape(a.agent)}</td><td>{escape(str(a.status))}"
                + (f'<div class="reason">{escape(a.reason)}</div>' if a.reason else "")
                + f"</td><td>{fmt_seconds(a.duration)}</td><td>{escape(_usage(a, prices))}</td>"
                f"<td>{_attempt_logs(a, folder)}</td>"
            )
            rows.append((first if n == 0 else "<tr>") + cells + "</tr>")
    return (
        '<section><h2>Tasks and attempts</h2><table class="tasks"><thead><tr><th>task</th>'
        "<th>wave</th><th>status</th><th>#</th><th>agent</th><th>attempt</th><th>time</th>"
        "<th>cost</th><th>logs</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _verification(record: dict[str, Any] | None, folder: Path) -> str:
    if not record:
        return "<section><h2>Verification</h2><p>not run</p></section>"
    head = (
        f"<p><b>{escape(str(record.get('verdict', '?')))}</b> on "
        f"<code>{escape(str(record.get('commit', ''))[:12])}</code>"
        + (" (remembered verdict)" if record.get("cached") else "")
        + f" in {fmt_seconds(record.get('duration'))}</p>"
    )
    rows = []
    for lane, data in (record.get("lanes") or {}).items():
        for run in data.get("runs", []):
            what = "timed out" if run.get("timed_out") else f"exit {run.get('exit_code')}"
            rows.append(
                f"<tr><td>{escape(str(lane))}</td><td>{escape(str(data.get('verdict', '')))}</td>"
                f"<td>{escape(str(run.get('kind', '')))}</td><td>{escape(what)}</td>"
                f"<td>{fmt_seconds(run.get('duration'))}</td>"
                f"<td>{_log_link(run.get('log'), folder, 'log')}</td></tr>"
            )
    table = (
        '<table class="tasks"><thead><tr><th>lane</th><th>verdict</th><th>run</th><th>result</th>'
        "<th>time</th><th>log</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else ""
    )
    return f"<section><h2>Verification</h2>{head}{table}</section>"
