"""What every command of the command line shares: the app, its options, the way an
answer is printed and a repository found. Only `forge/cli/` knows typer; core modules
are imported inside each command, so a fast command (`status`, the hooks' fast path,
`--help`) pays for no DAG or GitPython."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click
import typer
import typer.core

from forge import __version__
from forge.errors import ExitCode

if TYPE_CHECKING:
    from forge.base.settings import Settings
    from forge.git.repo import Repository
# typer escapes the `[required]`, `[default: 0; x>=0]` it adds to option help whenever
# rich is importable (the help showed `\[x>=1]`): help is rendered by click, unescaped.
typer.core.HAS_RICH = False

# The order a person meets the commands in: make a plan, run it, look at it, land it,
# then the upkeep. A command not named here (a newer one) comes after, as registered.
COMMAND_ORDER = (
    "plan", "draft", "run", "retry", "status", "report", "verify", "tests", "stats",
    "accept", "hold", "resume", "split", "combine", "clean", "forget", "hooks",
    "doctor", "demo",
)  # fmt: skip


class _Commands(typer.core.TyperGroup):
    """The top-level help: commands in `COMMAND_ORDER`, each with its first sentence
    whole (click cut every line at the terminal's width with `...`; the table wraps)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda name: (rank.get(name, len(rank)), names.index(name)))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    cls=_Commands,
    name="forge",
    help="Turn one goal into many coding tasks, run them in parallel git worktrees, "
    "and land them safely.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    suggest_commands=False,  # click says "Did you mean 'run'?" itself (typer said it again)
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"forge {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    _version_flag: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print forge's version and exit."
        ),
    ] = False,
) -> None:
    """Turn one goal into many coding tasks, run them in parallel git worktrees, and land
    them safely."""


hooks_app = typer.Typer(help="Install or remove the git hooks that trigger verification.")
app.add_typer(hooks_app, name="hooks")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
PlanArg = Annotated[
    str | None,
    typer.Argument(
        metavar="PLAN", help="Plan name or plan file (may be left out when there is one plan)."
    ),
]
PlanOpt = Annotated[str | None, typer.Option("--plan", help="Plan name or plan file.")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Say what would happen; change nothing.")
]
SandboxOpt = Annotated[
    bool | None,
    typer.Option(
        "--sandbox/--no-sandbox",
        help="Run every command under bubblewrap, only its folder writable (the default "
        "where `forge doctor` finds that the sandbox holds), or not.",
        show_default=False,
    ),
]
BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget", metavar="USD", help='Pause when the plan has spent this ("20 USD", 20).'
    ),
]


emitted: list[bool] = []  # a JSON answer is on stdout already (then a failure adds none)
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        metavar="ADDRESS",
        help="Run attempts on a Dask cluster: tcp://host:8786, or local:N for N local workers.",
    ),
]


def emit_json(data: object) -> None:
    emitted.append(True)
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def settings(*, worktree_root: Path | None = None) -> Settings:
    from forge.base.settings import Settings

    return Settings.from_env(worktree_root=worktree_root)


def repo_here(*, worktree_root: Path | None = None) -> Repository:
    from forge.git.repo import discover

    return discover(settings=settings(worktree_root=worktree_root))


def plan_name(repo: Repository, ref: str | None) -> str:
    from forge.commands.target import plan_name

    return plan_name(repo, ref)


def answer(answer: Mapping[str, object] | str | Iterable[str]) -> None:
    """The answer: JSON for scripts, or text for people (a string as is; lines, each ended)."""
    if isinstance(answer, Mapping):
        emit_json(answer)
    else:
        text = answer if isinstance(answer, str) else "".join(f"{line}\n" for line in answer)
        typer.echo(text, nl=False)


def say(line: str) -> None:
    sys.stderr.write(f"forge: {line}\n")


def exit_with(code: ExitCode) -> None:
    if code != ExitCode.OK:
        raise typer.Exit(int(code))
