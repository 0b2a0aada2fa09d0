"""Where the next attempt of a task starts: the every-attempt path (salvage what a void
attempt left, then put the task's branch on the last judged work or the base)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from forge.frozen import frozen
from forge.git import worktrees
from forge.git.merge import is_ancestor, merge_onto
from forge.git.repo import Repository
from forge.plan.model import Plan
from forge.run.state import events as ev
from forge.run.state.records import by_gate
from forge.run.state.run_state import FAILURES, Attempt, Status, TaskState


@frozen
class Start:
    """How the next attempt is asked to start: `fresh` (from the base, `--fresh`),
    as a `shell` task (a command always starts from the base), and the
    `integration_head` a retry may start on instead of its old base."""

    fresh: bool = False
    shell: bool = False
    integration_head: str | None = None
    known_clean: bool = False  # the slot holds nothing uncommitted: no look needed


def reset_for_attempt(
    repo: Repository,
    plan: Plan,
    ts: TaskState,
    path: Path | None,
    *,
    start: Start = Start(),
    record: Callable[[ev.Event], None],
) -> tuple[str, str | None]:
    """Bring the task's branch to where the next attempt starts, in its slot at `path`.

    An attempt that never reached a verdict (interrupted, killed, infrastructure) is
    void: what it left, committed or not, goes to a salvage ref first, then the branch
    goes back to the last judged work (the last failed attempt's commit, so a retry
    fixes its own work) or to the pinned base (first attempt, or --fresh).
    Returns (start commit, salvage ref or None). `path` is None for an attempt that
    runs elsewhere (a cluster worker): there is no slot here to look at or clear.
    """
    assert ts.base is not None and ts.branch is not None
    fresh, shell, integration_head = start.fresh, start.shell, start.integration_head
    known_clean = start.known_clean
    failures = [a for a in ts.attempts[:-1] if a.status in FAILURES]
    conflicted = bool(failures) and failures[-1].status == Status.CONFLICT
    if integration_head and failures and (fresh or conflicted or shell):
        # A conflict comes back on every retry from the old base: start again on
        # what integration holds now (so do --fresh and a shell command, which
        # starts from scratch anyway). The diff is measured against the new base.
        record(ev.Rebased(ts.id, integration_head))
    judged = [a for a in failures if a.commit]
    # A shell command re-run on its own output would apply itself twice: shell
    # tasks always start from the base; agents fix their own last work.
    continue_work = judged and not (fresh or conflicted or shell)
    begin = str(judged[-1].commit) if continue_work else ts.base
    if continue_work and integration_head and _broke_verification(failures[-1]):
        # It broke the verification with what landed before it: it has to adapt to
        # that work, so it continues on its own work merged onto the landed head.
        onto = merge_onto(
            repo,
            integration_head,
            begin,
            message=f"forge: {plan.name}/{ts.id} onto the integration head",
        )
        if onto.merged and not onto.already and onto.commit:
            record(ev.Rebased(ts.id, integration_head))
            begin = onto.commit
    salvaged = None
    if path is not None:
        dirty = [] if known_clean else worktrees.dirty_paths(path, repo)
        salvaged = worktrees.salvage_and_clear(repo, path, plan=plan.name, task=ts.id, dirty=dirty)
    head = repo.ref_value(ts.branch) or ts.base
    if path is not None and not known_clean and not salvaged:
        # Commits the agent made in its slot that never came back (the run was
        # killed before forge committed its work) live only in the slot.
        salvaged = worktrees.keep_local_commits(repo, path, head, plan=plan.name, task=ts.id)
    recorded = {a.commit for a in judged}  # a judged attempt's work: named in its record
    if (
        salvaged is None
        and head != begin
        and head not in recorded
        and not is_ancestor(repo, head, begin)
    ):
        salvaged = worktrees.keep(repo, head, plan=plan.name, task=ts.id)
    if salvaged:
        record(ev.Salvaged(ts.id, (salvaged,)))
    if head != begin:
        if path is not None:
            worktrees.detach(repo, path)
        repo.update_ref(ts.branch, begin, head, message="forge: reset task branch")
    return begin, salvaged


def _broke_verification(attempt: Attempt) -> bool:
    return by_gate(attempt.feedback_source)
