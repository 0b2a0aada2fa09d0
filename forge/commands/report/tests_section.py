"""The report's "Tests" section: the tests that shaped the gate's verdicts without
blaming anyone: flaky (passed and failed on one tree), quarantined, and failing on
the integration head already, each with its runs and failure rate."""

from __future__ import annotations

from html import escape

from forge.commands.tests import KnownTest
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan.registry import Recorded
from forge.plan.repo_config import load_repo_config
from forge.run.state.gate_story import PreExisting


@frozen
class Noted:
    """A test worth a look (`runs` and `failures` None: not in the history)."""

    test: str
    lane: str
    runs: int | None
    failures: int | None
    flaky: bool
    flake_rate: float | None
    quarantined: bool
    why: str | None
    pre_existing: bool  # failing on the integration head already


def rows_for(repo: Repository, recorded: Recorded, pre_existing: PreExisting | None) -> list[Noted]:
    """One row a test worth a look: flaky, quarantined or failing on the head (from
    the whole history, as quarantine is judged over it)."""
    from forge.commands import tests as view

    try:
        config = recorded.plan.verify_under(load_repo_config(repo.root, read_agents=False))
    except ForgeError:
        config = None
    red = {(t.lane, t.test) for t in (pre_existing.tests if pre_existing else [])}
    rows = []
    for r in view.tests_data(repo, config=config):
        on_head = (r["lane"], r["test"]) in red
        if r["flaky"] or r["quarantined"] or on_head:
            rows.append(_noted(r, on_head=on_head))
    known = {(r.lane, r.test) for r in rows}
    for lane, test in sorted(red - known):  # failing on the head, not in the history
        rows.append(Noted(test, lane, None, None, False, None, False, None, pre_existing=True))
    return rows


def _noted(r: KnownTest, *, on_head: bool) -> Noted:
    return Noted(
        test=r["test"],
        lane=r["lane"],
        runs=r["runs"],
        failures=r["failures"],
        flaky=r["flaky"],
        flake_rate=r["flake_rate"],
        quarantined=r["quarantined"],
        why=r["why"],
        pre_existing=on_head,
    )


def section(rows: list[Noted]) -> str:
    if not rows:
        return (
            "<section><h2>Tests</h2><p>no flaky, quarantined or pre-existing failing "
            "test</p></section>"
        )
    body = []
    for r in rows:
        runs, bad = r.runs, r.failures
        rate = f"{(bad or 0) / runs:.0%}" if runs else "-"
        flaky = f"yes ({r.flake_rate or 0:.0%} of its runs fail)" if r.flaky else "no"
        held = f"yes ({escape(str(r.why))})" if r.quarantined else "no"
        body.append(
            f"<tr><td><code>{escape(r.test)}</code></td><td>{escape(r.lane)}</td>"
            f"<td>{'-' if runs is None else runs}</td><td>{'-' if bad is None else bad}</td>"
            f"<td>{rate}</td><td>{flaky}</td><td>{held}</td>"
            f"<td>{'yes' if r.pre_existing else 'no'}</td></tr>"
        )
    return (
        "<section><h2>Tests</h2>"
        '<p class="note">tests that blamed nobody: flaky (passed and failed on one tree), '
        "quarantined (still run and reported, never blocking), and failing on the "
        "integration head already</p>"
        '<table class="tasks"><thead><tr><th>test</th><th>lane</th><th>runs</th>'
        "<th>failures</th><th>failure rate</th><th>flaky</th><th>quarantined</th>"
        "<th>failing on the head</th></tr></thead><tbody>" + "".join(body) + "</tbody></table>"
        "</section>"
    )
