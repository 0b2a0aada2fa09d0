"""`forge pr`: hand the verified work to the code host as a pull request."""

from __future__ import annotations

from typing import Annotated

import typer

from forge.cli.kit import JsonOpt, PlanArg, answer, app, exit_with, plan_name, repo_here, say


@app.command()
def pr(
    plan_ref: PlanArg = None,
    remote: Annotated[
        str, typer.Option("--remote", help="The git remote to push to and open it on.")
    ] = "origin",
    base: Annotated[
        str | None,
        typer.Option("--base", help="The branch it asks to merge into (default: the host's)."),
    ] = None,
    per_task: Annotated[
        bool,
        typer.Option(
            "--per-task", help="One pull request a landed task, stacked in landing order."
        ),
    ] = False,
    draft: Annotated[bool, typer.Option("--draft", help="Open it as a draft.")] = False,
    auto_merge: Annotated[
        bool,
        typer.Option("--auto-merge", help="Ask the host to merge it when its rules allow."),
    ] = False,
    merge_method: Annotated[
        str | None,
        typer.Option(
            "--merge-method", metavar="M", help="merge, squash or rebase (default: the host's)."
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option("--watch", help="Follow its checks and reviews until they settle."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Push the plan's verified integration head and open (or update) its pull request."""
    from forge.commands.pr.handoff import hand_off
    from forge.commands.pr.session import PrOptions

    repo = repo_here()
    opts = PrOptions(
        remote=remote,
        base=base,
        draft=draft,
        auto_merge=auto_merge,
        merge_method=merge_method,
        watch=watch,
    )
    if per_task:
        from forge.commands.pr.stack import hand_off_stack

        handed = hand_off_stack(repo, plan_name(repo, plan_ref), opts, say=say)
    else:
        handed = hand_off(repo, plan_name(repo, plan_ref), opts, say=say)
    answer(handed.to_dict() if as_json else handed.lines)
    exit_with(handed.code)
