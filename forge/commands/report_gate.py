"""The gate's part of `forge report`: the run's outcome for the header's badge, and
every verification the gate ran (batch, bisection step, speculation) as a table
with its verdict, tasks, failing tests and logs."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

from forge.commands.status import fmt_seconds
from forge.run.state.run_state import RunState, Status
from forge.verify.records import Verdict

NOT_LANDED = (Status.FAILED, Status.TIMEOUT, Status.CONFLICT, Status.BLOCKED, Status.INFRA)


def culprits(state: RunState) -> list[str]:
    """Tasks the gate blamed: FAILED by a verification."""
    return [
        tid
        for tid, ts in state.tasks.items()
        if ts.status == Status.FAILED
        and ts.last is not None
        and (ts.last.feedback_source or "").startswith("verify:")
    ]


def outcome(state: RunState) -> tuple[str, str]:
    """The badge's text and class: `PASS`, `PASS · 1 culprit`, `FAIL`,
    `INTERRUPTED`, never a bare PASS next to a task that did not land."""
    verdict = str(state.verification.verdict) if state.verification else "not verified"
    last = state.gate_last or {}
    if last.get("verdict") == Verdict.INTERRUPTED or any(
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


def step_tip(step: dict[str, Any]) -> str:
    """A gate verification's bar tooltip: what it judged and what came of it."""
    tasks = ", ".join(step.get("tasks") or []) or "the integration head"
    tests = "; ".join(_failure(f) for f in step.get("failures") or [])
    return f"{step.get('name')}: {step.get('verdict', '?')} of {tasks}" + (
        f"\nfailing: {tests}" if tests else ""
    )


def _failure(f: dict[str, Any]) -> str:
    return (
        f"{f.get('lane')}"
        + (f" {f['test']}" if f.get("test") else "")
        + (f": {f['message']}" if f.get("message") else "")
    )


def _link(log: str, folder: Path, label: str) -> str:
    href = os.path.relpath(log, folder)
    return f'<a href="{escape(href)}">{escape(label)}</a>'


def section(state: RunState, folder: Path) -> str:
    """Every verification the gate ran in the last run, in order."""
    steps = [s for s in state.gate_steps if isinstance(s, dict)]
    if not steps:
        return ""
    blamed = set(culprits(state))
    rows = []
    for n, s in enumerate(steps, start=1):
        tasks = [str(t) for t in s.get("tasks") or []]
        shown = ", ".join(f"<b>{escape(t)}</b>" if t in blamed else escape(t) for t in tasks)
        failing = "<br>".join(escape(_failure(f)) for f in s.get("failures") or [])
        logs = " ".join(
            _link(str(log), folder, str(lane)) for lane, log in (s.get("logs") or {}).items()
        )
        took = float(s.get("end") or 0) - float(s.get("start") or 0)
        rows.append(
            f"<tr><td>{n}</td><td>{escape(str(s.get('name', '')))}</td>"
            f"<td>{escape(str(s.get('verdict', '?')))}</td>"
            f"<td><code>{escape(str(s.get('commit') or '')[:12])}</code></td>"
            f"<td>{shown or '-'}</td><td>{failing or '-'}</td>"
            f"<td>{s.get('runs', '-')}</td><td>{fmt_seconds(took)}</td><td>{logs}</td></tr>"
        )
    return (
        "<section><h2>Gate verifications</h2>"
        '<p class="note">every verification the gate ran in the last run; a culprit in '
        'bold</p><table class="tasks"><thead><tr><th>#</th><th>step</th><th>verdict</th>'
        "<th>candidate</th><th>tasks</th><th>failing</th><th>runs</th><th>time</th>"
        "<th>logs</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></section>"
    )
