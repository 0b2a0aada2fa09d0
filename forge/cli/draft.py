"""`forge draft`: a planner agent turns a goal into a plan file, checked before it is
written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forge.cli.kit import JsonOpt, SandboxOpt, answer, app, exit_with, repo_here, say
from forge.errors import ExitCode


@app.command()
def draft(
    goal: Annotated[str, typer.Argument(help="What the plan should achieve, in words.")],
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            metavar="FILE",
            help="The plan file to write (default plans/<name>.toml).",
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="SPEC",
            help="The planner's spec (default: [draft] agent, else claude).",
        ),
    ] = None,
    tries: Annotated[
        int,
        typer.Option(
            "--tries", min=1, metavar="N", help="Answers to ask for at most (problems sent back)."
        ),
    ] = 3,
    base: Annotated[
        str | None,
        typer.Option("--base", metavar="REV", help="The commit the planner reads (default HEAD)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace FILE when it exists.")] = False,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ask a planner agent for a plan, check it, send the problems back; write it when sound."""
    from forge.base.interrupt import on_stop_signals
    from forge.commands import draft as drafting

    opts = drafting.Options(
        goal=goal, out=out, agent=agent, tries=tries, base=base, force=force, sandbox=sandbox
    )
    with on_stop_signals() as stop:
        result = drafting.draft(repo_here(), opts, say=say, stop=stop)
    for warning in result.checked.warnings:
        say(f"warning: {warning}")
    if result.sound:
        answer(result.data() if as_json else result.text() + "\n")
        return
    if as_json:
        answer(result.data())
    say(f"no sound plan after {len(result.tries)} tries; nothing written. The last problems:")
    for problem in result.checked.problems:
        say(f"  {problem}")
    say(f"the planner's last answer: {result.tries[-1].answered_in}")
    exit_with(ExitCode.USAGE)
