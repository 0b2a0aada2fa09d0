"""The command line: parse, call the core, render, map errors to exit codes.

The only module that knows typer. Core modules are imported inside each command so
that a fast command (`status`, the hooks' fast path, `--help`) does not pay for the
DAG or GitPython.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from forge.errors import ExitCode, ForgeError

app = typer.Typer(
    name="forge",
    help="Turn one goal into many coding tasks, run them in parallel git worktrees, "
    "and land them safely.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
hooks_app = typer.Typer(help="Install or remove the git hooks that trigger verification.")
app.add_typer(hooks_app, name="hooks")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
PlanArg = Annotated[
    str | None,
    typer.Argument(help="Plan name or plan file (may be left out when there is one plan)."),
]
PlanOpt = Annotated[str | None, typer.Option("--plan", help="Plan name or plan file.")]


def _not_yet(what: str) -> NoReturn:
    raise ForgeError(f"`forge {what}` is not available in this version of forge")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


@app.command()
def plan(
    plan_file: Annotated[Path, typer.Argument(help="The plan file (TOML).", metavar="PLAN.toml")],
    check: Annotated[bool, typer.Option("--check", help="Validate only; record nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate a plan, build its DAG, compute waves, record it; print the wave table."""
    _not_yet("plan")


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
    as_json: JsonOpt = False,
) -> None:
    """Run (or resume) a plan: dispatch tasks, merge into integration, verify."""
    _not_yet("run")


@app.command()
def retry(
    task: Annotated[str, typer.Argument(help="The task to run again.")],
    plan_ref: PlanOpt = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent spec name[:model[:effort]] from now on.")
    ] = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Start again from the pinned base, not the last work.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run one failed task again with its last failure as feedback, then merge and verify."""
    _not_yet("retry")


@app.command()
def verify(
    rev: Annotated[str | None, typer.Argument(help="Commit to verify.")] = None,
    plan_ref: PlanOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Ignore a remembered verdict.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Verify a commit (default: the plan's integration head, or HEAD outside a plan)."""
    _not_yet("verify")


@app.command()
def status(
    target: Annotated[str | None, typer.Argument(help="Plan, or a task of the plan.")] = None,
    plan_ref: PlanOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a plan's tasks, attempts, verification and worktrees."""
    _not_yet("status")


@app.command()
def accept(
    plan_ref: PlanArg = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="Make a merge commit when a fast-forward is impossible.")
    ] = False,
) -> None:
    """Bring a verified integration branch into your branch (fast-forward by default)."""
    _not_yet("accept")


@app.command()
def hold(
    reason: Annotated[str, typer.Option("--reason", help="Why nothing new may start.")],
    plan_ref: PlanOpt = None,
) -> None:
    """Stop new dispatches (repository-wide, or one plan with --plan)."""
    _not_yet("hold")


@app.command()
def resume(plan_ref: PlanOpt = None) -> None:
    """Allow new dispatches again (removes the hold `forge hold` set)."""
    _not_yet("resume")


@app.command()
def clean(
    plan_ref: PlanArg = None,
    all_plans: Annotated[bool, typer.Option("--all", help="Clean every plan.")] = False,
) -> None:
    """Remove a plan's worktrees and branches (unmerged work is salvaged to a ref first)."""
    _not_yet("clean")


@hooks_app.command("install")
def hooks_install() -> None:
    """Install forge's git hooks (keeping and chaining any hook already there)."""
    _not_yet("hooks install")


@hooks_app.command("uninstall")
def hooks_uninstall() -> None:
    """Remove forge's git hooks and restore what was there before."""
    _not_yet("hooks uninstall")


@app.command()
def demo(
    path: Annotated[
        Path | None,
        typer.Argument(help="Where to create the demo repository (default: a temp dir)."),
    ] = None,
) -> None:
    """Build a throwaway repository and run a sample plan end to end (no AI, no network)."""
    _not_yet("demo")


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        app(args=argv, prog_name="forge")
    except ForgeError as exc:
        for line in exc.message.splitlines() or [type(exc).__name__]:
            sys.stderr.write(f"forge: {line}\n")
        sys.exit(int(exc.code))
    except KeyboardInterrupt:
        sys.stderr.write("forge: interrupted\n")
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(ExitCode.OK)
