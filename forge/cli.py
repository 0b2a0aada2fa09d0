"""The command line: parse, call the core, render, map errors to exit codes. The only
module that knows typer; core modules are imported inside each command, so a fast
command (`status`, the hooks' fast path, `--help`) pays for no DAG or GitPython."""

from __future__ import annotations

import copy
import gc
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
import typer.core

from forge import __version__
from forge.errors import ExitCode, ForgeError

if TYPE_CHECKING:
    from forge.base.settings import Settings
    from forge.git.repo import Repository
# typer escapes the `[required]`, `[default: 0; x>=0]` it adds to option help whenever
# rich is importable (the help showed `\[x>=1]`): help is rendered by click, unescaped.
typer.core.HAS_RICH = False

app = typer.Typer(
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
BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget", metavar="USD", help='Pause when the plan has spent this ("20 USD", 20).'
    ),
]


_emitted: list[bool] = []  # a JSON answer is on stdout already (then a failure adds none)
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        metavar="ADDRESS",
        help="Run attempts on a Dask cluster: tcp://host:8786, or local:N for N local workers.",
    ),
]


def emit_json(data: Any) -> None:
    _emitted.append(True)
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


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

    answer = plan_command.answer(
        plan_file,
        check_only=check,
        graph=graph,
        graph_format=graph_format,
        as_json=as_json,
        repo=_repo,
        say=_say,
    )
    _answer(answer)


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
    sandbox: Annotated[
        bool, typer.Option("--sandbox", help="Run every command under bubblewrap.")
    ] = False,
    cluster: ClusterOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run (or resume) a plan: dispatch tasks, merge into integration, verify."""
    from forge.commands.run import budget_option, execute
    from forge.plan import registry
    from forge.run.options import RunOptions

    # The slots, the verification checkouts and (through their environment) the
    # agents' own forge calls all see this root.
    repo = _repo(worktree_root=worktree_root)
    recorded = registry.resolve(repo, plan_ref)
    options = RunOptions(
        max_parallel=max_parallel,
        retry_failed=retry_failed,
        infra_retries=infra_retries,
        budget=budget_option(budget),
        sandbox=sandbox,
    )
    answer, code = execute(repo, recorded, options, as_json=as_json, cluster=cluster)
    _answer(answer)
    _exit(code)


@app.command()
def retry(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task to run again.")],
    plan_ref: PlanOpt = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent spec name[:model[:effort]] from now on.")
    ] = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Start again from the pinned base, not the last work.")
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

    repo = _repo()
    recorded = registry.resolve(repo, plan_ref)
    runner.check_retry(repo, recorded.plan, task, agent=agent, fresh=fresh)
    options = RunOptions(
        only=task, fresh=fresh, agent=agent, retry_failed=0, budget=budget_option(budget)
    )
    answer, code = execute(repo, recorded, options, as_json=as_json, cluster=cluster)
    _answer(answer)
    _exit(code)


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
        _repo(),
        rev=rev,
        plan_ref=plan_ref,
        force=force,
        on_event=None if as_json else _say,
        warn=_say,
    )
    record = verified.record
    _answer(record.to_dict() if as_json else verify_command.render(record))
    verify_command.raise_for_verdict(verified)


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

    repo = _repo()
    plan_name, task = status_target(repo, target, plan_ref, task=task_arg)
    if not as_json:
        _answer(views.render(repo, plan_name, task, disk=disk))
    elif task is None:
        _answer(views.status_data(repo, plan_name, disk=disk))
    else:
        _answer(views.task_status_data(repo, plan_name, task, disk=disk))


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

    repo = _repo()
    recorded = load_recorded(repo, _plan_name(repo, plan_ref))
    page = pages.build(repo, recorded, out=out, prices=load_repo_config(repo.root).all_prices())
    path = pages.write(page)
    typer.echo(f"report: {path}")
    if open_it:
        import webbrowser

        if not webbrowser.open(path.as_uri()):
            raise ForgeError(f"no browser to open {path} with: open it by hand")


@app.command()
def accept(
    plan_ref: PlanArg = None,
    merge: Annotated[
        bool, typer.Option("--merge", help="Make a merge commit when a fast-forward is impossible.")
    ] = False,
    now: Annotated[
        bool, typer.Option("--now", help="While the plan runs: bring in its verified head so far.")
    ] = False,
) -> None:
    """Bring a verified integration branch into your branch (fast-forward by default)."""
    from forge.commands.accept import accept as do_accept

    repo = _repo()
    typer.echo(do_accept(repo, _plan_name(repo, plan_ref), merge=merge, now=now))


@app.command()
def split(
    plan_ref: PlanArg = None,
    tasks: Annotated[
        str, typer.Option("--tasks", help="The tasks to move, comma-separated: a,b.")
    ] = "",
    into: Annotated[str, typer.Option("--into", help="Name of the new plan.")] = "",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print both plans' waves; write nothing.")
    ] = False,
) -> None:
    """Move tasks that have not merged into a new plan (file and record)."""
    from forge.commands.split import split as do_split

    if not into:
        raise ForgeError("name the new plan: --into NEW")
    _answer(do_split(_repo(), plan_ref, tasks.split(","), into, dry_run=dry_run))


@app.command()
def combine(
    new: Annotated[str, typer.Argument(metavar="NEW", help="Name of the combined plan.")],
    plans: Annotated[
        list[str], typer.Argument(metavar="PLAN...", help="The plans to combine (two or more).")
    ],
    verify: Annotated[
        str | None, typer.Option("--verify", help="Verify with this command instead.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would happen; write nothing.")
    ] = False,
) -> None:
    """Merge several plans' integration heads into one verified integration branch."""
    from forge.base import interrupt
    from forge.commands.combine import combine as do_combine

    repo = _repo()
    with interrupt.on_stop_signals() as stop:
        lines = do_combine(
            repo, new, plans, verify=verify, dry_run=dry_run, stop=stop, on_event=_say
        )
    _answer(lines)


@app.command()
def hold(
    reason: Annotated[str, typer.Option("--reason", help="Why nothing new may start.")],
    plan_ref: PlanOpt = None,
) -> None:
    """Stop new dispatches (repository-wide, or one plan with --plan)."""
    from forge.run.state import hold as holds

    repo = _repo()
    plan = _plan_name(repo, plan_ref) if plan_ref else None
    h = holds.set_hold(repo.state, plan, reason=reason)
    again = "forge resume" + (f" --plan {plan}" if plan else "")
    typer.echo(f"hold set: {h.describe()}\nnothing new starts until `{again}`")


@app.command()
def resume(plan_ref: PlanOpt = None) -> None:
    """Allow new dispatches again (removes the hold `forge hold` set)."""
    from forge.run.state import hold as holds

    repo = _repo()
    plan = _plan_name(repo, plan_ref) if plan_ref else None
    removed = holds.release(repo.state, plan)
    where = f" on plan '{plan}'" if plan else " on the repository"
    typer.echo(f"hold removed ({removed.describe()})" if removed else "no hold was set" + where)


@app.command()
def clean(
    plan_ref: PlanArg = None,
    all_plans: Annotated[bool, typer.Option("--all", help="Clean every plan.")] = False,
) -> None:
    """Remove a plan's worktrees and branches (unmerged work is salvaged to a ref first)."""
    from forge.commands.clean import clean_plan

    repo = _repo()
    if all_plans and plan_ref:
        raise ForgeError("give a plan or --all, not both")
    names = repo.state.recorded_plans() if all_plans else [_plan_name(repo, plan_ref)]
    for name in names:
        for note in clean_plan(repo, name):
            typer.echo(f"{name}: {note}")
    if not names:
        typer.echo("no plans recorded: nothing to clean")


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

    data = agent_stats.stats_data(_repo().state, plan=plan, since=since)
    _answer(data if as_json else agent_stats.render(data))


@hooks_app.command("install")
def hooks_install() -> None:
    """Install forge's git hooks (keeping and chaining any hook already there)."""
    from forge.hooks import runtime as hooks

    repo = _repo()
    _answer(hooks.install(repo))
    for warning in hooks.unverified_warning(repo):
        sys.stderr.write(f"forge: warning: {warning}\n")


@hooks_app.command("uninstall")
def hooks_uninstall() -> None:
    """Remove forge's git hooks and restore what was there before."""
    from forge.hooks import runtime as hooks

    _answer(hooks.uninstall(_repo()))


@app.command()
def demo(
    path: Annotated[
        Path | None,
        typer.Argument(help="Where to create the demo repository (default: a temp dir)."),
    ] = None,
) -> None:
    """Build a throwaway repository and run a sample plan end to end (no AI, no network)."""
    from forge.commands.demo import run_demo

    _exit(run_demo(path, _settings(), echo=typer.echo))


def _settings(*, worktree_root: Path | None = None) -> Settings:
    from forge.base.settings import Settings

    return Settings.from_env(worktree_root=worktree_root)


def _repo(*, worktree_root: Path | None = None) -> Repository:
    from forge.git.repo import discover

    return discover(settings=_settings(worktree_root=worktree_root))


def _plan_name(repo: Repository, ref: str | None) -> str:
    from forge.commands.target import plan_name

    return plan_name(repo, ref)


def _answer(answer: dict[str, Any] | str | Iterable[str]) -> None:
    """The answer: JSON for scripts, or text for people (a string as is; lines, each ended)."""
    if isinstance(answer, dict):
        emit_json(answer)
    else:
        text = answer if isinstance(answer, str) else "".join(f"{line}\n" for line in answer)
        typer.echo(text, nl=False)


def _say(line: str) -> None:
    sys.stderr.write(f"forge: {line}\n")


def _exit(code: ExitCode) -> None:
    if code != ExitCode.OK:
        raise typer.Exit(int(code))


def main(argv: list[str] | None = None) -> NoReturn:
    from forge.base.text import guard_standard_streams

    guard_standard_streams()
    args = sys.argv[1:] if argv is None else argv
    try:
        _app_for(args)(args=argv, prog_name="forge")
    except ForgeError as exc:
        _fail(exc.message or type(exc).__name__, exc.code, as_json="--json" in args)
    except KeyboardInterrupt:
        _fail("interrupted", ExitCode.INTERRUPTED, as_json="--json" in args)
    finally:
        # The process ends: no last collection of all it made (25-40 ms); exit handlers run.
        gc.freeze()
    sys.exit(ExitCode.OK)


def _app_for(args: list[str]) -> typer.Typer:
    """The one command `args` name, alone (typer reads the parameters of every command
    it is given: ~15 ms a call), or the whole app (help, version, hooks, a typo)."""
    for info in app.registered_commands if args and not args[0].startswith("-") else []:
        if str(info.name or getattr(info.callback, "__name__", "")).replace("_", "-") == args[0]:
            one = copy.copy(app)
            one.registered_commands, one.registered_groups = [info], []
            return one
    return app


def _fail(message: str, code: ExitCode, *, as_json: bool) -> NoReturn:
    """One `forge: ` line a person reads on stderr; with --json also the failure as
    JSON on stdout, so a script that parses stdout gets an answer, not nothing."""
    if as_json and not _emitted:
        emit_json({"error": message, "exit_code": int(code)})
    for line in message.splitlines():
        sys.stderr.write(f"forge: {line}\n")
    sys.exit(int(code))
