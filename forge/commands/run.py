"""`forge run`, `forge retry` and the demo's run: the plan runs under the live view,
then the answer: what happened, what it spent and the next step, said (what a
person does after a run or a retry ends)."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from forge.errors import ExitCode, ForgeError

if TYPE_CHECKING:
    from forge.git.repo import Repository
    from forge.plan.registry import Recorded
    from forge.run.options import RunOptions


def execute(
    repo: Repository,
    recorded: Recorded,
    options: RunOptions,
    *,
    as_json: bool,
    cluster: str | None = None,
) -> tuple[dict[str, object] | str, ExitCode]:
    """Run the plan; the answer (JSON data, or the text to print) and the exit code."""
    from forge.base import interrupt
    from forge.commands import results
    from forge.commands import status as views
    from forge.commands.live import LiveView
    from forge.plan.repo_config import load_repo_config
    from forge.run import runner
    from forge.run.records.spend import spend_data

    plan = recorded.plan
    config = load_repo_config(repo.root)
    prices = config.all_prices()
    remote = None
    if cluster or config.cluster_address:  # the cluster's modules only when there is one
        from forge.cluster import coordinator

        remote = coordinator.from_settings(repo, cluster, config)
    view = LiveView(
        quiet=as_json,
        weights={t.id: t.estimate or 1.0 for t in plan.tasks},
        prices=prices,
        parallel=options.max_parallel or plan.max_parallel,
        event_log=repo.state.logs_dir(plan.name) / "events.log",
    )
    with interrupt.on_stop_signals() as stop, view:
        report = runner.run_plan(
            repo,
            recorded,
            replace(options, repo_config=config),
            stop=stop,
            around=runner.Around(view.on_change, view.on_event, remote),
        )
    from forge.commands.next_step import next_steps
    from forge.run.notify import notify_end

    notify_end(report, plan.notify or config.notify, cwd=repo.root)

    steps = next_steps(report, recorded.plan, only=options.only)
    spend = spend_data(report.state, prices)
    if as_json:
        data = {**results.report_data(report, prices), "next": steps, "spend": spend}
        return data, report.exit_code
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    text = results.render_report(report, width=width)
    text += views.spend_line(spend, options.budget or plan.budget) + "\n"
    text += "".join(line + "\n" for line in steps)
    return text, report.exit_code


def budget_option(text: str | None) -> float | None:
    """`--budget`: dollars, or None when not given."""
    if text is None:
        return None
    from forge.plan.budget import parse_budget

    try:
        return parse_budget(text)
    except ValueError as exc:
        raise ForgeError(f"--budget: {exc}") from exc
