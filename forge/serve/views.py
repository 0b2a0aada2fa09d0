"""What `forge serve` shows, as sections of the report's page (forge/commands/report/):
a plan's page is the report's sections with links to logs through the server, and a
section of controls; the index is a table of the repository's plans. A record this
forge cannot read (a newer forge wrote it) is a section saying to upgrade."""

from __future__ import annotations

import time
from html import escape
from urllib.parse import quote

from forge.base.liveness import Owner
from forge.commands.report import render, tests_section
from forge.commands.report.render import Section
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan.registry import load_recorded
from forge.run.gate import story
from forge.run.records.spend import plan_spend
from forge.run.state import hold as holds
from forge.run.state.run_state import FAILURES, RunState, Status
from forge.run.state.store import StateStore, Tail

Prices = dict[str, tuple[float, float]]


@frozen
class PlanView:
    """A plan's page (its sections) and its row of the index."""

    sections: list[Section]
    row: str


def served_links(log: str) -> str:
    return "/log?path=" + quote(log, safe="")


def plan_view(repo: Repository, name: str, prices: Prices, tail: Tail | None = None) -> PlanView:
    """`tail`: the plan's state as followed so far (None: read it whole)."""
    try:
        recorded = load_recorded(repo, name)
        tail = tail or Tail(repo.state.state_file(name))
        state = tail.read() or StateStore(repo.state, name).load(
            [t.id for t in recorded.plan.tasks]
        )
        tests = tests_section.rows_for(repo, recorded, state)
        parts = render.sections(recorded, state, links=served_links, prices=prices, tests=tests)
    except (ForgeError, OSError) as exc:
        return _unreadable(name, str(exc))
    except Exception as exc:  # noqa: BLE001 - one plan's page that breaks stops no other page
        return _unreadable(name, f"{type(exc).__name__}: {exc}")
    runner = _runner(repo, name)
    hold = holds.active(repo.state, name)
    held = hold.describe() if hold else None
    controls = Section("live", _controls(name, state, runner, held))
    return PlanView([controls, *parts], _row(repo, name, state, runner, prices))


def _unreadable(name: str, why: str) -> PlanView:
    """The page of a plan whose records this forge cannot read: never a crash."""
    text = (
        f"<header><h1>{escape(name)}</h1><p><b>upgrade forge</b> to see this plan: its "
        f"records are not in a form this forge reads (a newer forge may have written "
        f'them).</p><p class="reason">{escape(why)}</p></header>'
    )
    row = (
        f'<tr><td><a href="/plan/{quote(name)}">{escape(name)}</a></td>'
        f'<td colspan="5">upgrade forge: {escape(why)}</td></tr>'
    )
    return PlanView([Section("head", text)], row)


def _runner(repo: Repository, name: str) -> Owner | None:
    """The process running the plan now (None: no run is active)."""
    from forge.base.files import read_json

    try:
        owner = Owner.from_dict(read_json(repo.state.plan_dir(name) / "owner.json", what="owner"))
    except (FileNotFoundError, ForgeError, KeyError, TypeError, ValueError):
        return None
    return owner if owner.alive() else None


def run_active(repo: Repository, name: str) -> bool:
    return _runner(repo, name) is not None


def _controls(name: str, state: RunState, runner: Owner | None, held: str | None) -> str:
    base = f"/plan/{quote(name)}"
    run = f"running: {runner.describe()}" if runner else "no run active"
    if held:
        hold = f'{escape(held)} <button data-action="{base}/resume">resume</button>'
    else:
        hold = f'no hold <button data-action="{base}/hold">hold</button>'
    # (a run active retries by itself, with --retry-failed: a retry beside it is refused)
    failed = [t.id for t in state.tasks.values() if t.status in FAILURES and runner is None]
    retry = " ".join(
        f'<button data-action="{base}/retry/{quote(t)}">retry {escape(t)}</button>' for t in failed
    )
    return (
        f'<section class="controls"><a href="/">all plans</a> · {escape(run)} · {hold}'
        + (f"<p>{retry}</p>" if retry else "")
        + "</section>"
    )


def _row(repo: Repository, name: str, state: RunState, runner: Owner | None, prices: Prices) -> str:
    counts: dict[str, int] = {}
    for ts in state.tasks.values():
        counts[str(ts.status)] = counts.get(str(ts.status), 0) + 1
    tasks = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
    verdict, cls = story.outcome(state)
    spend = plan_spend(state, prices)
    activity = _last_activity(repo, name)
    status = "running" if runner else ("held" if holds.active(repo.state, name) else "idle")
    merged = counts.get(Status.MERGED, 0)
    return (
        f'<tr><td><a href="/plan/{quote(name)}"><b>{escape(name)}</b></a></td>'
        f"<td>{status}</td><td>{escape(tasks) or '-'} ({merged}/{len(state.tasks)} merged)</td>"
        f"<td>{escape(spend.describe())}</td>"
        f'<td><span class="verdict v-{cls}">{escape(str(verdict))}</span></td>'
        f"<td>{escape(activity)}</td></tr>"
    )


def _last_activity(repo: Repository, name: str) -> str:
    folder = repo.state.plan_dir(name)
    stamps = [p.stat().st_mtime for p in folder.glob("state*.json*") if p.is_file()]
    if not stamps:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(max(stamps)))


def index_sections(repo: Repository, rows: list[str]) -> list[Section]:
    head = (
        f"<header><h1>forge: {escape(repo.root.name)}</h1>"
        f'<p class="note">{escape(str(repo.root))}</p></header>'
    )
    table = (
        '<section><h2>Plans</h2><table class="tasks"><thead><tr><th>plan</th><th>now</th>'
        "<th>tasks</th><th>cost</th><th>outcome</th><th>last activity</th></tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table></section>"
        if rows
        else "<section><h2>Plans</h2><p>no plan recorded yet: <code>forge plan PLAN.toml"
        "</code></p></section>"
    )
    return [Section("head", head), Section("plans", table)]
