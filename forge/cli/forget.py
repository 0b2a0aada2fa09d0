"""`forge forget PLAN`: drop a cleaned plan's record."""

from __future__ import annotations

from typing import Annotated

import typer

from forge.cli.kit import app, repo_here


@app.command()
def forget(
    plan: Annotated[
        str, typer.Argument(metavar="PLAN", help="The plan to forget (cleaned first).")
    ],
) -> None:
    """Drop a plan's record, run state and logs (after `forge clean PLAN`)."""
    from forge.commands.plans.forget import forget as do_forget

    typer.echo(do_forget(repo_here(), plan))
