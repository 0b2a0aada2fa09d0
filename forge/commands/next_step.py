"""The next step, said: what a person does after a run or a retry ends."""

from __future__ import annotations

from forge.plan.model import Plan
from forge.run.runner import RunReport
from forge.run.state.records import by_gate
from forge.run.state.run_state import FAILURES, RunState, Status
from forge.verify.records import Verdict

SETUP_FAILED = "setup failed: "  # the reason of an attempt whose setup failed


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
    out += _after_failures(plan, state, failed)
    verdict = report.verification.verdict if report.verification is not None else None
    suggested = [ts.id for ts in state.tasks.values() if ts.suggestion]
    if failed or verdict == Verdict.FAIL or suggested:
        # A real task, so the line runs as written: the first that failed or stopped.
        task = (failed + suggested + list(state.tasks) + [plan.tasks[0].id])[0]
        out.append(
            f"see: `forge status {name} {task}` for a task's attempts, "
            f"`forge report {name}` for the whole run as a page"
        )
    return out


def _after_failures(plan: Plan, state: RunState, failed: list[str]) -> list[str]:
    """What fits the failures: a setup that failed everywhere is the plan's to fix,
    a shell command is fixed in the plan (feedback reaches no agent), an agent's
    failure is retried with its failure as feedback."""
    if not failed:
        return []
    name = plan.name
    where = plan.source or f"plan {name}'s file"
    replan = f"`forge plan {plan.source}`" if plan.source else "`forge plan` of it"
    reasons = [state.tasks[t].reason for t in failed]
    merged = any(ts.status == Status.MERGED for ts in state.tasks.values())
    if not merged and all(r.startswith(SETUP_FAILED) for r in reasons):
        return [
            f"setup failed in every slot: {reasons[0].removeprefix(SETUP_FAILED)}; fix setup "
            f"in {where} and run again: {replan}, then `forge run {name} --retry-failed 1`"
        ]
    blamed = [t for t in failed if _gate_blamed(state, t)]
    shell = [t for t in failed if plan.task(t).run is not None and t not in blamed]
    agents = [t for t in failed if t not in shell and t not in blamed]
    out = []
    blamed_shell = [t for t in blamed if plan.task(t).run is not None]
    blamed_agents = [t for t in blamed if t not in blamed_shell]
    if blamed_agents:
        first = blamed_agents[0]
        more = len(blamed_agents) - 1
        others = "" if not more else f" (and {more} more blamed by it)"
        out.append(
            f"next: {first} failed the verification; `forge retry {first} --plan {name}` "
            f"runs its agent again with the failure as feedback{others}; "
            f"`forge retry {first} --plan {name} --requeue` sends the same change again "
            f"when the failure was the environment's"
        )
    if blamed_shell:
        # Its command makes the same change again: a retry would fail the same way.
        first = blamed_shell[0]
        more = len(blamed_shell) - 1
        others = "" if not more else f" (and {more} more shell task{'s' if more > 1 else ''})"
        out.append(
            f"next: {first}'s change failed the verification: it is a shell command, so fix "
            f"its `run` in {where}, then {replan} and `forge retry {first} --plan {name} "
            f"--fresh`{others}; `forge retry {first} --plan {name} --requeue` when the "
            f"failure was not its change's (a flaky or broken environment)"
        )
    if agents:
        first = agents[0]
        others = "" if len(agents) == 1 else f" (and {len(agents) - 1} more failed)"
        out.append(
            f"next: `forge retry {first} --plan {name}` retries it with its failure as "
            f"feedback{others}; "
            f"`forge run {name} --retry-failed 1` retries every failed task once"
        )
    if shell:
        first = shell[0]
        more = len(shell) - 1
        others = (
            "" if not more else f" (and {more} more shell task{'s' if more > 1 else ''} failed)"
        )
        out.append(
            f"next: {first} is a shell command: fix its `run` in {where}, then {replan} "
            f"and `forge retry {first} --plan {name} --fresh`{others}"
        )
    return out


def _gate_blamed(state: RunState, task: str) -> bool:
    """Did the gate's verification fail the task's last attempt?"""
    last = state.tasks[task].last
    return last is not None and by_gate(last.feedback_source)


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
