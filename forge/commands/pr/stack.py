"""`forge pr --per-task`: one pull request a landed task, stacked in landing order
(as ghstack and spr do): each task's landing commit goes to a branch of its own
(`forge-stack/<plan>/<task>`), and its pull request is based on the branch of the
task landed before it (the first on the base). Later calls update them in place;
once the host merged the bottom one, the next is retargeted onto the base.

The host's checks come back per pull request: the first of the stack failing a
check that its parent passed (or that has no parent) names its task, blamed as
the gate's culprit would be: a verdict `hosted: NAME` of its commit, said with
the task's name."""

from __future__ import annotations

from dataclasses import replace

from forge.commands.pr.handoff import open_hand_off
from forge.commands.pr.session import (
    Handed,
    PrOptions,
    Say,
    Session,
    fetch,
    leased_push,
    pr_lock,
)
from forge.errors import ExitCode, ForgeError
from forge.git.repo import Repository
from forge.host import record as records
from forge.host.api import CheckState, NewPull, PrState
from forge.host.record import PrRecord
from forge.host.story import task_body
from forge.run.state.run_state import RunState, Status


def hand_off_stack(repo: Repository, plan: str, opts: PrOptions, *, say: Say) -> Handed:
    with pr_lock(repo, plan):
        return _hand_off_stack(repo, plan, opts, say=say)


def _hand_off_stack(repo: Repository, plan: str, opts: PrOptions, *, say: Say) -> Handed:
    if opts.watch:
        raise ForgeError("--watch follows one pull request a plan: leave out --per-task")
    opened = open_hand_off(repo, plan, opts, say=say)
    state, session, info = opened.state, opened.session, opened.info
    order = landing_order(repo, state, opened.head)
    if not order:
        raise ForgeError(f"plan '{plan}' has landed no task: nothing to hand off")
    base = opts.base or info.default_branch
    stack = records.load_stack(repo.state, plan)
    lines: list[str] = []
    parent = base
    for task, commit in order:
        rec = stack.get(task) or PrRecord(
            opts.remote, session.target.slug, f"forge-stack/{plan}/{task}", base
        )
        if rec.number is not None and rec.state != PrState.MERGED:
            stack[task] = rec = fetch(session, rec)
        if rec.state == PrState.MERGED:
            continue  # landed upstream: the next one is based on what it was merged into
        bottom = parent == base
        stack[task] = rec = _one(session, plan, stack, rec, commit, parent)
        said = f"#{rec.number} {task} (on {parent})"
        lines.append(f"{'opened' if rec.fetched is None else 'updated'} {said}: {rec.url}")
        if opts.auto_merge and bottom:
            session.host.auto_merge(session.host.pull(rec.number or 0), opts.merge_method)
            lines.append(f"asked to merge #{rec.number} when its rules allow; the rest wait")
        parent = rec.branch
    for task in stack:
        stack[task] = fetch(session, stack[task]) if stack[task].number else stack[task]
    records.save_stack(repo.state, plan, stack)
    lines += [f"{task}: {rec.summary()}" for task, rec in stack.items()]
    blamed = blame(stack)
    lines += [
        f"FAIL {lane} on {task}'s pull request (its parent passed): task {task}"
        for task, lane in blamed
    ]
    code = ExitCode.FAILED if blamed else ExitCode.OK
    return Handed(plan, next(reversed(stack.values())), lines, code, stack=stack)


def landing_order(repo: Repository, state: RunState, head: str) -> list[tuple[str, str]]:
    """(task, the integration commit that landed it) for every merged task, in the
    order they landed on the integration branch's first-parent line."""
    line = repo.git("rev-list", "--first-parent", "--reverse", head).split()
    at = {sha: i for i, sha in enumerate(line)}
    merged = [
        (ts.id, ts.merged_commit)
        for ts in state.tasks.values()
        if ts.status == Status.MERGED and ts.merged_commit in at
    ]
    return sorted(
        ((tid, sha) for tid, sha in merged if sha is not None), key=lambda pair: at[pair[1]]
    )


def _one(
    session: Session,
    plan: str,
    stack: dict[str, PrRecord],
    rec: PrRecord,
    commit: str,
    parent: str,
) -> PrRecord:
    """One task's branch pushed (its landing commit) and its pull request opened or
    updated on `parent`."""
    task = rec.branch.rpartition("/")[2]
    ours = {sha for sha in (rec.pushed, rec.pushing) if sha}

    def intent() -> None:
        records.save_stack(session.repo.state, plan, {**stack, task: replace(rec, pushing=commit)})

    leased_push(session, (rec.remote, rec.branch), commit, ours, intent=intent)
    rec = replace(rec, pushed=commit, pushing=None, base=parent)
    ts = session.state.tasks[task]
    new = NewPull(
        f"{ts.id}: forge plan {plan}",
        task_body(session.state, ts, parent),
        head=rec.branch,
        base=parent,
    )
    if rec.number is None:
        pull = session.host.find_pull(rec.branch) or session.host.open_pull(new)
    else:
        pull = session.host.pull(rec.number)
        if pull.state == PrState.CLOSED:
            raise ForgeError(
                f"pull request #{pull.number} ({task}) was closed without a merge (by a person): "
                "forge leaves it closed; reopen it on the host to hand off again"
            )
    if pull.state != PrState.MERGED:
        pull = session.host.update_pull(pull.number, new)
    return replace(rec, number=pull.number, url=pull.url, state=str(pull.state))


def blame(stack: dict[str, PrRecord]) -> list[tuple[str, str]]:
    """(task, `hosted: NAME`) for each check whose first failure up the stack has a
    parent that passed it (or no parent): that pull request's task broke it."""
    out: list[tuple[str, str]] = []
    passed_below: dict[str, bool] = {}
    for task, rec in stack.items():
        if rec.state == PrState.MERGED:
            continue
        for check in rec.checks:
            below = passed_below.get(check.name, True)
            if check.state == CheckState.FAILED and below:
                out.append((task, f"hosted: {check.name}"))
            passed_below[check.name] = check.state == CheckState.PASSED
    return out
