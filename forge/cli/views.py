"""The commands that show or set up: status, report, stats, hooks, demo."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from forge.cli.kit import (
    JsonOpt,
    PlanArg,
    PlanOpt,
    answer,
    app,
    exit_with,
    hooks_app,
    plan_name,
    repo_here,
    settings,
)
from forge.errors import ForgeError


@app.command()
def status(
    target: Annotated[
        str | None, typer.Argument(metavar="PLAN|TASK", help="Plan, or a task of the plan.")
    ] = None,
    task_arg: Annotated[
        str | None, typer.Argument(metavar="[TASK]", help="With a PLAN: a task of that plan.")
    ] = None,
    plan_ref: PlanOpt = None,
    disk: Annotated[
        bool, typer.Option("--disk", help="Measure the worktrees' disk use now.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a plan's tasks, attempts, verification and worktrees."""
    from forge.commands import status as views
    from forge.commands.target import status_target

    repo = repo_here()
    if disk and target is None and plan_ref is None and len(repo.state.recorded_plans()) > 1:
        overview = views.disk_overview(repo)  # every plan's and the repository's
        answer(overview if as_json else views.render_disk_overview(overview))
        return
    plan_name, task = status_target(repo, target, plan_ref, task=task_arg)
    if not as_json:
        answer(views.render(repo, plan_name, task, disk=disk))
    elif task is None:
        answer(views.status_data(repo, plan_name, disk=disk))
    else:
        answer(views.task_status_data(repo, plan_name, task, disk=disk))


@app.command()
def report(
    plan_ref: PlanArg = None,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Where to write the page (default: beside the logs)."),
    ] = None,
    open_it: Annotated[
        bool, typer.Option("--open", help="Open the page in the default browser.")
    ] = False,
) -> None:
    """Write one self-contained HTML page of a plan's run: DAG, timeline, attempts, costs."""
    from forge.commands.report import render as pages
    from forge.plan.registry import load_recorded
    from forge.plan.repo_config import load_repo_config

    repo = repo_here()
    recorded = load_recorded(repo, plan_name(repo, plan_ref))
    page = pages.build(repo, recorded, out=out, prices=load_repo_config(repo.root).all_prices())
    path = pages.write(page)
    typer.echo(f"report: {path}")
    if open_it:
        import webbrowser

        if not webbrowser.open(path.as_uri()):
            raise ForgeError(f"no browser to open {path} with: open it by hand")


@app.command()
def serve(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port (0: any free one).")
    ] = 8765,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="The address to bind; any but loopback needs the printed token."
        ),
    ] = "127.0.0.1",
    open_it: Annotated[
        bool, typer.Option("--open", help="Open the page in the default browser.")
    ] = False,
) -> None:
    """Serve a live web page of the repository's plans: DAG, timeline, gate, costs, logs."""
    from forge.serve import command

    command.serve(repo_here(), host=host, port=port, open_it=open_it)


@app.command()
def stats(
    plan: Annotated[str | None, typer.Option("--plan", help="Only this plan's attempts.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only attempts this recent (7d, 12h).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Per agent spec, across runs: attempts, landed tasks, land rate, cost per landed task."""
    from forge.commands import stats as agent_stats

    data = agent_stats.stats_data(repo_here().state, plan=plan, since=since)
    answer(data if as_json else agent_stats.render(data))


@hooks_app.command("install")
def hooks_install() -> None:
    """Install forge's git hooks (keeping and chaining any hook already there)."""
    from forge.hooks import runtime as hooks

    repo = repo_here()
    answer(hooks.install(repo))
    for warning in hooks.unverified_warning(repo):
        sys.stderr.write(f"forge: warning: {warning}\n")


@hooks_app.command("uninstall")
def hooks_uninstall() -> None:
    """Remove forge's git hooks and restore what was there before."""
    from forge.hooks import runtime as hooks

    answer(hooks.uninstall(repo_here()))


@app.command()
def demo(
    path: Annotated[
        Path | None,
        typer.Argument(help="Where to create the demo repository (default: a temp dir)."),
    ] = None,
) -> None:
    """Build a throwaway repository and run a sample plan end to end (no AI, no network)."""
    from forge.commands.demo import run_demo

    exit_with(run_demo(path, settings(), echo=typer.echo))


@app.command()
def shell(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task whose worktree to open.")],
    plan_ref: PlanOpt = None,
    command: Annotated[
        str | None, typer.Option("-c", "--command", help="Run this command there instead.")
    ] = None,
) -> None:
    """Open a shell in the worktree holding a task's work (a FAILED task's)."""
    from forge.commands.plans.shell import open_shell
    from forge.commands.target import status_target

    repo = repo_here()
    name, _ = status_target(repo, task, plan_ref)
    raise typer.Exit(open_shell(repo, name, task, command))
