"""`forge report`: one self-contained HTML page of a plan's run.

The DAG by wave with each task's status; a timeline of every attempt per slot,
split into its phases (whatever phases the attempt recorded: the list is data),
and of the verification (its lanes; the gate's batches and bisection steps of every
run); per task its attempts with agent, time, cost and links to the
logs; the totals and the verdict. Inline CSS and SVG only: no script, no network,
it opens from a file:// URL, and links to logs are relative to the page.

The page is a list of sections, each in a `<div id="s-NAME">` of its own: `forge
serve`'s live page is the same sections (its links to logs through the server), and
replaces one whose HTML changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from html import escape
from pathlib import Path

from forge.base.text import usd, write_output_file
from forge.commands.candidate_view import summary, timeline_attempts
from forge.commands.report import header, queue, svg, tests_section
from forge.commands.report.axis import Clock, clock
from forge.commands.report.template import PAGE
from forge.commands.status import fmt_seconds
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan.registry import Recorded
from forge.run.gate import story
from forge.run.records.spend import (
    attempt_spend,
    plan_spend,
)
from forge.run.state.gate_story import GateStep
from forge.run.state.run_state import Attempt, RunState, Status
from forge.run.state.store import StateStore
from forge.verify.failures import Failure
from forge.verify.records import VerifyRecord

# A log's path as the page links to it: relative to the page's file, or the server's URL.
Links = Callable[[str], str]


def relative_links(folder: Path) -> Links:
    return lambda log: os.path.relpath(log, folder)


@frozen
class Section:
    """One part of the page: its name (the element's id is `s-NAME`) and its HTML."""

    name: str
    html: str

    def element(self) -> str:
        return f'<div id="s-{self.name}">{self.html}</div>'


@frozen
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
    tests = tests_section.rows_for(repo, recorded, state)
    parts = sections(
        recorded, state, links=relative_links(path.parent), prices=prices or {}, tests=tests
    )
    return Page(page(recorded.plan.name, parts), path)


def write(page: Page) -> Path:
    """Only where a regular file belongs: a directory or device is refused as it is."""
    write_output_file(page.path, page.html)
    return page.path


# -- the page ------------------------------------------------------------------


def page(name: str, parts: list[Section], *, extra: str = "") -> str:
    """The whole page: its sections in order, then `extra` (the live page's script)."""
    body = "\n".join(p.element() for p in parts) + extra
    return PAGE.format(title=escape(f"forge report: {name}"), body=body)


def sections(
    recorded: Recorded,
    state: RunState,
    *,
    links: Links,
    prices: dict[str, tuple[float, float]],
    tests: list[tests_section.Noted] | None = None,
) -> list[Section]:
    """The page's sections (`tests`: the rows of its "Tests" section, tests_section.py)."""
    plan = recorded.plan
    wave_of = {tid: n for n, wave in enumerate(recorded.waves, start=1) for tid in wave}
    spend = plan_spend(state, prices)
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
    lanes, axis, phases = timeline(state)
    dag_html = "".join(
        [
            '<section><h2>Tasks by wave</h2><div class="scroll">',
            dag,
            "</div>",
            svg.legend(sorted({*statuses.values()}), dict(svg.STATUS_COLORS)),
            "</section>",
        ]
    )
    timeline_html = "".join(
        [
            '<section><h2>Timeline</h2><p class="note">each attempt in the slot it ran in, '
            "split into its phases; then the verification, a row per lane</p>",
            '<div class="scroll">',
            svg.timeline_svg(lanes, axis.span, breaks=axis.breaks())
            if lanes
            else "<p>nothing has run yet</p>",
            "</div>",
            svg.legend(phases),
            "</section>",
        ]
    )
    return [
        Section("head", header.header(plan.name, state, spend, recorded, axis)),
        Section("dag", dag_html),
        Section("timeline", timeline_html),
        Section("queue", queue.section(state)),
        Section("verification", _verification(state.verification, links)),
        Section("gate", _gate_section(state, links)),
        Section("tests", tests_section.section(tests or [])),
        Section("tasks", _task_table(recorded, state, wave_of, links, prices)),
    ]


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
        last_end = max((p.end or p.start) for p in attempt.phases)
        return [(p.start, p.end or last_end, p.name) for p in attempt.phases]
    start = _epoch(attempt.started)
    if start is None:
        return []
    return [(start, start + (attempt.duration or 0.0), "attempt")]


def timeline(state: RunState) -> tuple[list[svg.Lane], Clock, list[str]]:
    """Lanes (a slot each, then the verification's lanes), the time axis (each run a
    segment, idle time between runs cut out), and the phase names that appear, in
    the order they first do."""
    raw: list[tuple[str, str, Attempt, list[tuple[float, float, str]]]] = []
    for task_id, ts in state.tasks.items():
        for tid, attempt in timeline_attempts(task_id, ts):  # (best-of-N: each candidate)
            bars = _attempt_bars(attempt)
            if bars:
                raw.append((attempt.slot or ts.slot or tid, tid, attempt, bars))
    work_ends = [b[1] for *_, bars in raw for b in bars]
    verify_bars = _verification_bars(state.verification, after=max(work_ends, default=None))
    verify_bars += _step_bars(state.gate_steps)
    axis = clock(
        [(b[0], b[1]) for *_, bars in raw for b in bars]
        + [(b[0], b[1]) for _, bars in verify_bars for b in bars]
    )
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
                    axis.at(start),
                    axis.at(end),
                    name,
                    tip,
                    f"#task-{tid.split(' ')[0]}",
                    label=tid if i == widest else "",
                )
            )
    out = sorted(lanes.values(), key=lambda lane: _natural(lane.name))
    for name, row in verify_bars:
        lane = svg.Lane(f"verify: {name}")
        for start, end, kind, text in row:
            if kind not in phases:
                phases.append(kind)
            tip = f"{text} {fmt_seconds(end - start)}"
            lane.bars.append(svg.Bar(axis.at(start), axis.at(end), kind, tip))
        out.append(lane)
    return out, axis, phases


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return head, int(tail) if tail else -1


Bar = tuple[float, float, str, str]  # start, end (epoch seconds), kind, tooltip


def _verification_bars(
    record: VerifyRecord | None, *, after: float | None
) -> list[tuple[str, list[Bar]]]:
    """A row per lane, its runs one after another from the record's start."""
    if record is None or record.cached:
        return []
    start = _epoch(record.started)
    if start is None:
        return []
    if after is not None and start <= after < start + 1:
        # The record keeps whole seconds; a verification that started in the second
        # the last attempt ended started after it.
        start = after
    rows: list[tuple[str, list[Bar]]] = []
    for lane in record.lanes:
        t = start
        bars = []
        for run in lane.runs:
            duration = round(run.duration, 3)  # (as the record is saved)
            bars.append((t, t + duration, run.kind, f"{lane.name}: {run.kind}"))
            t += duration
        rows.append((lane.name, bars))
    return rows


def _step_bars(gate_steps: list[GateStep]) -> list[tuple[str, list[Bar]]]:
    """The gate's verifications of every run (batches, bisection, speculation): a
    row per step name. Drawn whether or not the head's verdict was answered from the
    cache."""
    steps: dict[str, list[Bar]] = {}
    for step in gate_steps:
        bar = (step.start, step.end or step.start, step.name, step.tip())
        steps.setdefault(step.name, []).append(bar)
    return list(steps.items())


def _log_link(log: str | None, links: Links, label: str) -> str:
    if not log:
        return ""
    href = links(log)
    return f'<a href="{escape(href)}">{escape(label)}</a>'


def _attempt_logs(attempt: Attempt, links: Links) -> str:
    links_ = []
    if attempt.log:
        log_dir = Path(attempt.log).parent
        try:  # one look at the folder, not one a name (500 tasks: a tenth of a second)
            present = set(os.listdir(log_dir))
        except OSError:
            present = set()
        for name in ("setup.log", "agent.log", "check.log", "merge.log", "prompt.md"):
            candidate = os.path.join(log_dir, name)
            if name in present or candidate == attempt.log:
                links_.append(_log_link(candidate, links, name.split(".")[0]))
        if log_dir.name != f"attempt-{attempt.number}":  # a failing verification's log
            source = attempt.feedback_source
            label = "log" if source is None else str(source.kind)
            links_.append(_log_link(attempt.log, links, label))
    return " ".join(links_)


_FAILURES_SHOWN = 5


def _failures(failures: list[Failure]) -> str:
    """The failing tests a verification named, one line each."""
    shown = [f.describe() for f in failures[:_FAILURES_SHOWN]]
    more = len(failures) - len(shown)
    lines = [f"failed: {line}" for line in shown] + ([f"and {more} more"] if more else [])
    return "".join(f'<div class="reason">{escape(line)}</div>' for line in lines)


def _usage(attempt: Attempt, prices: dict[str, tuple[float, float]]) -> str:
    spend = attempt_spend(attempt, prices)
    parts = []
    if spend.priced:
        parts.append(usd(spend.usd, 4) + ("" if attempt.cost_usd is not None else " (priced)"))
    elif spend.unpriced:
        parts.append("cost unknown")
    if attempt.input_tokens is not None or attempt.output_tokens is not None:
        parts.append(f"{attempt.input_tokens or 0}/{attempt.output_tokens or 0} tok")
    return ", ".join(parts) or "-"


def _task_table(
    recorded: Recorded,
    state: RunState,
    wave_of: dict[str, int],
    links: Links,
    prices: dict[str, tuple[float, float]],
) -> str:
    rows = []
    for task in recorded.plan.tasks:
        ts = state.tasks.get(task.id)
        status = str(ts.status) if ts else Status.PENDING
        attempts = ts.attempts if ts else []
        reason = ts.reason if ts else ""
        if ts is not None and ts.candidates:  # best-of-N: the winner, and the others
            reason = "; ".join(x for x in (reason, f"candidates: {summary(ts)}") if x)
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
                + (
                    f'<div class="reason">model mismatch: {escape(a.model_mismatch)}</div>'
                    if a.model_mismatch
                    else ""
                )
                + _failures(a.failures)
                + f"</td><td>{fmt_seconds(a.duration)}</td><td>{escape(_usage(a, prices))}</td>"
                f"<td>{_attempt_logs(a, links)}</td>"
            )
            rows.append((first if n == 0 else "<tr>") + cells + "</tr>")
    return (
        '<section><h2>Tasks and attempts</h2><table class="tasks"><thead><tr><th>task</th>'
        "<th>wave</th><th>status</th><th>#</th><th>agent</th><th>attempt</th><th>time</th>"
        "<th>cost</th><th>logs</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _verification(record: VerifyRecord | None, links: Links) -> str:
    if record is None:
        return "<section><h2>Verification</h2><p>not run</p></section>"
    head = (
        f"<p><b>{escape(record.verdict.value)}</b> on "
        f"<code>{escape(record.commit[:12])}</code>"
        + (" (remembered verdict)" if record.cached else "")
        + f" in {fmt_seconds(round(record.duration, 3))}</p>"
    )
    rows = []
    for lane in record.lanes:
        for run in lane.runs:
            what = "timed out" if run.timed_out else f"exit {run.exit_code}"
            rows.append(
                f"<tr><td>{escape(lane.name)}</td><td>{escape(lane.verdict.value)}</td>"
                f"<td>{escape(run.kind)}</td><td>{escape(what)}"
                f"{_failures(list(run.failures))}</td>"
                f"<td>{fmt_seconds(round(run.duration, 3))}</td>"
                f"<td>{_log_link(run.log, links, 'log')}</td></tr>"
            )
    table = (
        '<table class="tasks"><thead><tr><th>lane</th><th>verdict</th><th>run</th><th>result</th>'
        "<th>time</th><th>log</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else ""
    )
    return f"<section><h2>Verification</h2>{head}{table}</section>"


def _verdict(step: GateStep) -> str:
    """`FAIL`, or `FAIL (cleared: b)` when the task it blamed had its blame given back."""
    return step.verdict + (f" (cleared: {', '.join(step.cleared)})" if step.cleared else "")


def _gate_section(state: RunState, links: Links) -> str:
    """Every verification the gate ran, run after run, in order."""
    steps = state.gate_steps
    if not steps:
        return ""
    blamed = set(story.culprits(state))
    rows = []
    for n, s in enumerate(steps, start=1):
        shown = ", ".join(f"<b>{escape(t)}</b>" if t in blamed else escape(t) for t in s.tasks)
        failing = "<br>".join(escape(f.text()) for f in s.failures)
        logs = " ".join(_log_link(log, links, lane) for lane, log in s.logs.items())
        took = (s.end or 0.0) - s.start
        rows.append(
            f"<tr><td>{n}</td><td>{'-' if s.run is None else s.run + 1}</td>"
            f"<td>{escape(s.name)}</td>"
            f"<td>{escape(_verdict(s))}</td>"
            f"<td><code>{escape((s.commit or '')[:12])}</code></td>"
            f"<td>{shown or '-'}</td><td>{failing or '-'}</td>"
            f"<td>{s.runs}</td><td>{fmt_seconds(took)}</td><td>{logs}</td></tr>"
        )
    return (
        "<section><h2>Gate verifications</h2>"
        '<p class="note">every verification the gate ran, in every run of the plan; a '
        'culprit in bold</p><table class="tasks"><thead><tr><th>#</th><th>run</th>'
        "<th>step</th><th>verdict</th>"
        "<th>candidate</th><th>tasks</th><th>failing</th><th>runs</th><th>time</th>"
        "<th>logs</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></section>"
    )
