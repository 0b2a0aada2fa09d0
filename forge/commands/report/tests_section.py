"""The report's "Tests" section: the tests that shaped the gate's verdicts without
blaming anyone: flaky (passed and failed on one tree), quarantined, and failing on
the integration head already, each with its runs and failure rate."""

from __future__ import annotations

from html import escape
from typing import Any

from forge.errors import ForgeError
from forge.git.repo import Repository
from forge.plan.registry import Recorded
from forge.plan.repo_config import load_repo_config
from forge.run.state.gate_story import PreExisting


def rows_for(
    repo: Repository, recorded: Recorded, pre_existing: PreExisting | None
) -> list[dict[str, Any]]:
    """One row a test worth a look: flaky, quarantined or failing on the head (from
    the whole history, as quarantine is judged over it)."""
    from forge.commands import tests as view

    try:
        config = recorded.plan.verify_under(load_repo_config(repo.root, read_agents=False))
    except ForgeError:
        config = None
    red = {(t.lane, t.test) for t in (pre_existing.tests if pre_existing else [])}
    rows = []
    for row in view.tests_data(repo, config=config):
        on_head = (row["lane"], row["test"]) in red
        if row["flaky"] or row["quarantined"] or on_head:
            rows.append({**row, "pre_existing": on_head})
    known = {(r["lane"], r["test"]) for r in rows}
    for lane, test in sorted(red - known):  # failing on the head, not in the history
        rows.append({"test": test, "lane": lane, "runs": None, "failures": None,
                     "flaky": False, "flake_rate": None, "quarantined": False, "why": None,
                     "pre_existing": True})  # fmt: skip
    return rows


def section(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return (
            "<section><h2>Tests</h2><p>no flaky, quarantined or pre-existing failing "
            "test</p></section>"
        )
    body = []
    for r in rows:
        runs, bad = r["runs"], r["failures"]
        rate = f"{bad / runs:.0%}" if runs else "-"
        flaky = f"yes ({r['flake_rate']:.0%} of its runs fail)" if r["flaky"] else "no"
        held = f"yes ({escape(str(r['why']))})" if r["quarantined"] else "no"
        body.append(
            f"<tr><td><code>{escape(str(r['test']))}</code></td><td>{escape(str(r['lane']))}</td>"
            f"<td>{'-' if runs is None else runs}</td><td>{'-' if bad is None else bad}</td>"
            f"<td>{rate}</td><td>{flaky}</td><td>{held}</td>"
            f"<td>{'yes' if r['pre_existing'] else 'no'}</td></tr>"
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
