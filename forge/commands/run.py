"""`forge run`, `forge retry` and the demo's run: the plan runs under the live view,
then the answer: what happened, what it spent and the next step, said (what a
person does after a run or a retry ends)."""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING, Any

from forge.errors import ExitCode, ForgeError
from forge.run.state.run_state import FAILURES, RunState, Status
from forge.verify.records import Verdict

if TYPE_CHECKING:
    from forge.git.repo import Repository
    from forge.plan.model import Plan
    from forge.plan.registry import Recorded
    from forge.run.options import RunOptions
    from forge.run.runner import RunReport


def execute(
    repo: Repository,
    recorded: Recorded,
    options: RunOptions,
    *,
    as_json: bool,
    cluster: str | None = None,
) -> tuple[dict[str, Any] | str, ExitCode]:
    """Run the plan; the answer (JSON data, or the text to print) and the exit code."""
    from forge.base import interrupt
    from forge.cluster import coordinator
    from forge.commands import status as views
    from forge.commands.live import LiveView
    from forge.plan.repo_config import load_repo_config
    from forge.run import runner
    from forge.run.spend import spend_data

    plan = recorded.plan
    prices = load_repo_config(repo.root).all_prices()
    remote = coordinator.from_settings(repo, cluster)
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
            options,
            stop=stop,
            on_change=view.on_change,
            on_event=view.on_event,
            remote=remote,
        )
    steps = next_steps(report, recorded.plan, only=options.only)
    spend = spend_data(report.state, prices)
    if as_json:
        data = {**views.report_data(report, prices), "next": steps, "spend": spend}
        return data, report.exit_code
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    text = views.render_report(report, width=width)
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


def next_steps(report: RunReport, plan: Plan, *, only: str | None) -> list[str]:
    """Lines to print under the results of `forge run` (or `forge retry` with
    `only`): the commands that move the plan on from where it stands."""
    if report.interrupted or report.paused:
        return []  # their own lines already say `forge run` resumes
    state = report.state
    failed = [ts.id for ts in state.tasks.values() if ts.status in FAILURES]
    name = plan.name
    out: list[str] = []
    if only is not None and state.tasks[only].status == Status.MERGED:
        waiting = _waiting_dependents(plan, state, only)
        if waiting:
            out.append(
                f"next: {only} merged; its dependents ({', '.join(waiting[:8])}"
                f"{', ...' if len(waiting) > 8 else ''}) wait for `forge run {name}`"
            )
    if failed:
        first = failed[0]
        others = "" if len(failed) == 1 else f" (and {len(failed) - 1} more failed)"
        out.append(
            f"next: `forge retry {first}` retries it with its failure as feedback{others}; "
            f"`forge run {name} --retry-failed 1` retries every failed task once"
        )
    verdict = report.verification.verdict if report.verification is not None else None
    if failed or verdict == Verdict.FAIL or any(ts.suggestion for ts in state.tasks.values()):
        out.append(
            f"see: `forge status {name} TASK` for a task's attempts, "
            f"`forge report {name}` for the whole run as a page"
        )
    return out


def _waiting_dependents(plan: Plan, state: RunState, task: str) -> list[str]:
    """Tasks downstream of `task` that have not merged (a retry runs one task only)."""
    dependants: dict[str, list[str]] = {}
    for t in plan.tasks:
        for dep in t.deps:
            dependants.setdefault(dep, []).append(t.id)
    seen: list[str] = []
    todo = list(dependants.get(task, []))
    while todo:
        tid = todo.pop(0)
        if tid in seen:
            continue
        ts = state.tasks.get(tid)
        if ts is not None and ts.status != Status.MERGED:
            seen.append(tid)
        todo += dependants.get(tid, [])
    return seen
