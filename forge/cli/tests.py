"""`forge tests`: each test's record across verifications, and a person's word on it."""

from __future__ import annotations

from typing import Annotated

import typer

from forge.cli.kit import JsonOpt, PlanOpt, answer, app, emit_json, repo_here
from forge.errors import ForgeError


@app.command()
def tests(
    plan_ref: PlanOpt = None,
    flaky: Annotated[bool, typer.Option("--flaky", help="Only flaky tests.")] = False,
    failing: Annotated[
        bool, typer.Option("--failing", help="Only tests whose last run failed.")
    ] = False,
    forget: Annotated[
        str | None, typer.Option("--forget", metavar="TEST", help="Drop a test's history.")
    ] = None,
    hold: Annotated[
        str | None,
        typer.Option("--quarantine", metavar="TEST", help="Quarantine a test (a person's word)."),
    ] = None,
    release: Annotated[
        str | None,
        typer.Option("--release", metavar="TEST", help="Release a test from quarantine."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """What forge knows of each test: runs, failures, flaky, quarantined, last failure."""
    from forge.commands import tests as view

    repo = repo_here()
    words = [
        (w, t) for w, t in (("forget", forget), ("quarantine", hold), ("release", release)) if t
    ]
    if len(words) > 1:
        raise ForgeError("give one of --forget, --quarantine and --release")
    if words:
        answer(view.word(repo, words[0][1], words[0][0]))
        return
    plan = config = None
    if plan_ref is not None:
        from forge.commands.target import plan_name
        from forge.plan.registry import load_recorded
        from forge.plan.repo_config import load_repo_config

        plan = plan_name(repo, plan_ref)
        recorded = load_recorded(repo, plan).plan
        config = recorded.verify_under(load_repo_config(repo.root, read_agents=False))
    rows = view.tests_data(repo, plan=plan, config=config, flaky=flaky, failing=failing)
    if as_json:
        emit_json(rows)
    elif rows or not (flaky or failing):
        answer([*view.render(rows), *view.ignored_rows(repo)])
    else:
        known = len(view.tests_data(repo, plan=plan, config=config))
        answer(view.render(rows, only="flaky" if flaky else "failing", known=known))
