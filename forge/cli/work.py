"""The commands that change a plan's work: plan, run, retry, verify, accept, split,
combine, hold, resume, clean."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.cli.kit import (
    BudgetOpt,
    ClusterOpt,
    DryRunOpt,
    JsonOpt,
    PlanArg,
    PlanOpt,
    SandboxOpt,
    answer,
    app,
    exit_with,
    plan_name,
    repo_here,
    say,
)
from forge.errors import ExitCode, ForgeError


@app.command()
def plan(
    plan_file: Annotated[Path, typer.Argument(help="The plan file (TOML).", metavar="PLAN.toml")],
    check: Annotated[bool, typer.Option("--check", help="Validate only; record nothing.")] = False,
    graph: Annotated[
        bool,
        typer.Option("--graph", help="Print the DAG as text (a view: records nothing)."),
    ] = False,
    graph_format: Annotated[
        str, typer.Option("--format", help="The --graph format: mermaid or dot.")
    ] = "mermaid",
    as_json: JsonOpt = False,
) -> None:
    """Validate a plan, build its DAG, compute waves, record it; print the wave table."""
    from forge.commands import plan as plan_command

    shown = plan_command.Shown(as_json=as_json, graph=graph, graph_format=graph_format)
    reply = plan_command.answer(plan_file, shown, check_only=check, repo=repo_here, say=say)
    answer(reply)


@app.command()
def run(
    plan_ref: PlanArg = None,
    max_parallel: Annotated[
        int | None, typer.Option("--max-parallel", min=1, help="Override the plan's max_parallel.")
    ] = None,
    retry_failed: Annotated[
        int, typer.Option("--retry-failed", min=0, help="Retry each failed task up to N times.")
    ] = 0,
    infra_retries: Annotated[
        int, typer.Option("--infra-retries", min=0, help="Backoff retries of an INFRA failure.")
    ] = 3,
    worktree_root: Annotated[
        Path | None, typer.Option("--worktree-root", help="Where task worktrees live.")
    ] = None,
    budget: BudgetOpt = None,
    sandbox: SandboxOpt = None,
    cluster: ClusterOpt = None,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Serve the live web page beside the run (as `forge serve`), and after it.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run (or resume) a plan: dispatch tasks, merge into integration, verify."""
    from forge.commands.run import budget_option, execute
    from forge.plan import registry
    from forge.run.options import RunOptions

    # The slots, the verification checkouts and (through their environment) the
    # agents' own forge calls all see this root.
    repo = repo_here(worktree_root=worktree_root)
    recorded = registry.resolve(repo, plan_ref)
    options = RunOptions(
        max_parallel=max_parallel,
        retry_failed=retry_failed,
        infra_retries=infra_retries,
        budget=budget_option(budget),
        sandbox=sandbox,
    )
    served = None
    if serve:
        from forge.serve import command

        served = command.start_beside(repo, say=say)
    reply, code = execute(repo, recorded, options, as_json=as_json, cluster=cluster)
    answer(reply)
    if served is not None and code == ExitCode.INTERRUPTED:
        served.stop()  # a Ctrl-C stops the run and the page: one is enough
    elif served is not None:
        command.keep_serving(served, say)
    exit_with(code)


@app.command()
def retry(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task to run again.")],
    plan_ref: PlanOpt = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent spec name[:model[:effort]] from now on.")
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Start again on the current integration head, not on the last attempt's work"
            " (a merged task whose definition changed runs again).",
        ),
    ] = False,
    review: Annotated[
        bool,
        typer.Option(
            "--review",
            help="Give the agent the review comments of the plan's pull request, then update it.",
        ),
    ] = False,
    requeue: Annotated[
        bool,
        typer.Option(
            "--requeue",
            help="A task the gate failed: send the same change to the gate again, running"
            " nothing else (its failure was the environment's, not its change's).",
        ),
    ] = False,
    budget: BudgetOpt = None,
    cluster: ClusterOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run one failed task again with its last failure as feedback, then merge and verify."""
    from forge.commands.run import budget_option, execute
    from forge.plan import registry
    from forge.run import runner
    from forge.run.options import RunOptions

    repo = repo_here()
    if plan_ref is None and len(names := repo.state.recorded_plans()) > 1:
        from forge.commands.target import plan_of_task

        plan_ref = plan_of_task(repo, task, names)  # the one plan that has the task
    recorded = registry.resolve(repo, plan_ref)
    runner.check_retry(repo, recorded.plan, task, agent=agent, fresh=fresh, review=review)
    if review:
        from forge.commands.pr.review import take_review

        take_review(repo, recorded.plan.name, task, say=say)
    if requeue:
        if agent is not None or fresh:
            raise ForgeError("--requeue sends the same change again: give no --agent or --fresh")
        from forge.run.gate import unblame

        unblame.requeue(repo, recorded.plan.name, task)
    options = RunOptions(
        only=task,
        requeued=requeue,
        fresh=fresh,
        review=review,
        agent=agent,
        retry_failed=0,
        budget=budget_option(budget),
    )
    reply, code = execute(repo, recorded, options, as_json=as_json, cluster=cluster)
    answer(reply)
    if review and code == 0:
        from forge.commands.pr.review import answer_review

        for line in answer_review(repo, recorded.plan.name, task, say=say):
            say(line)
    exit_with(code)


@app.command()
def verify(
    rev: Annotated[str | None, typer.Argument(metavar="REV", help="Commit to verify.")] = None,
    plan_ref: PlanOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Ignore a remembered verdict.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Verify a commit (default: the plan's integration head, or HEAD outside a plan)."""
    from forge.commands import verify as verify_command

    verified = verify_command.verify(
        repo_here(),
        rev=rev,
        plan_ref=plan_ref,
        force=force,
        on_event=None if as_json else say,
        warn=say,
    )
    record = verified.record
    answer(record.to_dict() if as_json else verify_command.render(record))
    verify_command.raise_for_verdict(verified)


@app.command()
def accept(
    plan_ref: PlanArg = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="Make a merge commit when a fast-forward is impossible.")
    ] = False,
    now: Annotated[
        bool, typer.Option("--now", help="While the plan runs: bring in its verified head so far.")
    ] = False,
    squash: Annotated[
        bool, typer.Option("--squash", help="One new commit a task, each titled by its task.")
    ] = False,
    squash_plan: Annotated[
        bool, typer.Option("--squash-plan", help="One new commit for the whole plan.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Bring a verified integration branch into your branch (fast-forward by default)."""
    from forge.commands.plans.accept import Squash
    from forge.commands.plans.accept import accept as do_accept

    if squash and squash_plan:
        raise ForgeError("give --squash or --squash-plan, not both")
    how: Squash | None = "task" if squash else "plan" if squash_plan else None
    repo = repo_here()
    done = do_accept(repo, plan_name(repo, plan_ref), merge=merge, now=now, squash=how)
    answer(done.as_json() if as_json else done.text + "\n")


@app.command()
def split(
    plan_ref: PlanArg = None,
    tasks: Annotated[
        str, typer.Option("--tasks", help="The tasks to move, comma-separated: a,b.")
    ] = "",
    into: Annotated[str, typer.Option("--into", help="Name of the new plan.")] = "",
    dry_run: DryRunOpt = False,
) -> None:
    """Move tasks that have not merged into a new plan (file and record); with
    --dry-run, print both plans' waves."""
    from forge.commands.plans.split import split as do_split

    if not into:
        raise ForgeError("name the new plan: --into NEW")
    answer(do_split(repo_here(), plan_ref, tasks.split(","), into, dry_run=dry_run))


@app.command()
def combine(
    new: Annotated[str, typer.Argument(metavar="NEW", help="Name of the combined plan.")],
    plans: Annotated[
        list[str], typer.Argument(metavar="PLAN...", help="The plans to combine (two or more).")
    ],
    verify: Annotated[
        str | None, typer.Option("--verify", help="Verify with this command instead.")
    ] = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Merge several plans' integration heads into one verified integration branch."""
    from forge.base import interrupt
    from forge.commands.plans.combine import Combining
    from forge.commands.plans.combine import combine as do_combine

    repo = repo_here()
    how = Combining(verify=verify, dry_run=dry_run)
    with interrupt.on_stop_signals() as stop:
        lines = do_combine(repo, new, plans, how, stop=stop, on_event=say)
    answer(lines)


@app.command()
def hold(
    reason: Annotated[str, typer.Option("--reason", help="Why nothing new may start.")],
    plan_ref: PlanOpt = None,
) -> None:
    """Stop new dispatches (repository-wide, or one plan with --plan)."""
    from forge.run.state import hold as holds

    repo = repo_here()
    plan = plan_name(repo, plan_ref) if plan_ref else None
    h = holds.set_hold(repo.state, plan, reason=reason)
    again = "forge resume" + (f" --plan {plan}" if plan else "")
    typer.echo(f"hold set: {h.describe()}\nnothing new starts until `{again}`")


@app.command()
def resume(plan_ref: PlanOpt = None) -> None:
    """Allow new dispatches again (removes the hold `forge hold` set)."""
    from forge.run.state import hold as holds

    repo = repo_here()
    plan = plan_name(repo, plan_ref) if plan_ref else None
    removed = holds.release(repo.state, plan)
    where = f" on plan '{plan}'" if plan else " on the repository"
    typer.echo(f"hold removed ({removed.describe()})" if removed else "no hold was set" + where)


@app.command()
def clean(
    plan_ref: PlanArg = None,
    all_plans: Annotated[
        bool, typer.Option("--all", help="Clean every plan, and the hooks' checkouts.")
    ] = False,
    dry_run: DryRunOpt = False,
    pool: Annotated[
        bool,
        typer.Option(
            "--pool", help="Empty the shared verification checkouts (plans, forge verify, hooks)."
        ),
    ] = False,
) -> None:
    """Remove a plan's worktrees and branches (unmerged work is salvaged to a ref first)."""
    from forge.commands.plans.clean import clean_plan, clean_shared

    repo = repo_here()
    if all_plans and plan_ref:
        raise ForgeError("give a plan or --all, not both")
    if pool:
        from forge.commands.plans.clean import empty_pool

        for note in empty_pool(repo):
            typer.echo(f"pool: {note}")
        if not (plan_ref or all_plans):
            return
    recorded = repo.state.recorded_plans()
    if not (plan_ref or all_plans) and len(recorded) > 1:
        raise ForgeError(
            f"several plans are recorded ({', '.join(recorded)}); name one, "
            f"or give --all to clean every plan"
        )
    names = recorded if all_plans else [plan_name(repo, plan_ref)]
    for name in names:
        for note in clean_plan(repo, name, dry_run=dry_run, with_all=all_plans):
            typer.echo(f"{name}: {note}")
    shared = clean_shared(repo, names, dry_run=dry_run) if all_plans else []
    for note in shared:
        typer.echo(note)
    if not names and not shared:
        typer.echo("no plans recorded: nothing to clean")
