"""Merge finished tasks into the integration branch without touching any working
tree: `merge-tree --write-tree`, `commit-tree` with two parents, and `update-ref`
with the expected old value. One merge at a time (the caller holds the lock)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from forge.base import faults, proc
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git import known, mergedir
from forge.git.identity import identity_env
from forge.git.repo import Repository

_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
UNRELATED = "its commit shares no history with the integration branch"


@frozen
class MergeResult:
    merged: bool
    commit: str | None = None  # the new integration head
    conflicts: tuple[str, ...] = ()
    already: bool = False  # the task's work was already on integration (a resumed merge)
    refused: str = ""  # why no merge can be built at all (no common history, ...)


def ensure_integration(repo: Repository, ref: str, base_commit: str) -> str:
    """The integration head, creating the branch at the plan's base on first use."""
    head = repo.ref_value(ref)
    if head is None:
        repo.update_ref(ref, base_commit, None, message="forge: start integration")
        head = base_commit
    return head


def is_ancestor(repo: Repository, commit: str, of: str) -> bool:
    return repo.try_git("merge-base", "--is-ancestor", commit, of).returncode == 0


def shares_history(repo: Repository, a: str, b: str) -> bool:
    """Whether the two commits have a common ancestor (a merge can be built)."""
    if a == b or known.child_of(b, a) or known.child_of(a, b):
        return True
    return repo.try_git("merge-base", a, b).returncode == 0


def changed(repo: Repository, base: str, head: str) -> list[str]:
    """The paths `head` changes against `base`."""
    # NUL-separated: without -z git quotes any name that is not plain ASCII.
    names = repo.git("diff", "--name-only", "-z", "--no-renames", base, head)
    return [p for p in names.split("\0") if p]


def merge_task(repo: Repository, *, ref: str, task_commit: str, message: str) -> MergeResult:
    """Merge `task_commit` into the branch `ref`; a conflict leaves `ref` untouched."""
    head = repo.ref_value(ref)
    if head is None:
        raise ForgeError(f"integration branch {ref} is missing; run `forge run` to recreate it")
    res = merge_onto(repo, head, task_commit, message=message)
    if not res.merged or res.already or res.commit is None:
        # (already: a run killed between update-ref and its state write; never merge
        # twice)
        return res
    commit = res.commit
    faults.point("merge-before-update-ref")
    repo.update_ref(ref, commit, head, message=message)
    faults.point("merge-after-update-ref")
    return MergeResult(merged=True, commit=commit)


def merge_onto(repo: Repository, head: str, task_commit: str, *, message: str) -> MergeResult:
    """The merge commit of `task_commit` onto `head`, written but on no ref: a step of
    a candidate chain, or the commit `merge_task` then moves the branch to. A commit
    already in `head` is `already` (nothing written: never merge twice)."""
    tree = known.tree(task_commit) if known.child_of(task_commit, head) else None
    if tree is None:
        found = _merged_tree(repo, head, task_commit)
        if isinstance(found, MergeResult):
            return found
        tree = found
    # else: forge made the task's commit right on `head`: the merge is its tree, and
    # neither `merge-base` nor `merge-tree` has anything to say.
    commit = repo.git(
        "commit-tree", tree, "-p", head, "-p", task_commit, "-m", message, env=identity_env(repo)
    ).strip()
    known.remember(commit, tree=tree, parents=(head, task_commit))
    return MergeResult(merged=True, commit=commit)


def _merged_tree(repo: Repository, head: str, task_commit: str) -> MergeResult | str:
    """The tree of `task_commit` merged onto `head`, or the MergeResult that says
    there is no merge to write (already in, unrelated, conflicting, refused)."""
    cp = None
    if known.unmerged_own(task_commit):
        # A commit forge has just written is in no branch yet: straight to the merge,
        # and `merge-base` only when git refuses it (no shared history).
        cp = _merge_tree(repo, head, task_commit)
        if cp.returncode in (0, 1):
            return _merged_or_conflicts(cp, head)
    # One `merge-base` answers both questions: none (exit 1) is no shared history,
    # and the task's commit as the base is a commit already in `head`.
    mb = repo.try_git("merge-base", head, task_commit)
    if mb.returncode == 0 and mb.stdout.split() == [task_commit]:
        return MergeResult(merged=True, commit=head, already=True)
    if mb.returncode == 0 and not _OID.match(task_commit) and is_ancestor(repo, task_commit, head):
        return MergeResult(merged=True, commit=head, already=True)  # named, not by its id
    if mb.returncode == 1 and not mb.stdout.strip():
        # An agent that re-inits or commits without a parent: the task's failure,
        # never the plan's (merge-tree refuses unrelated histories).
        return MergeResult(merged=False, refused=UNRELATED)
    return _merged_or_conflicts(cp or _merge_tree(repo, head, task_commit), head)


def _merge_tree(repo: Repository, head: str, task_commit: str) -> proc.Completed:
    # In a git dir of forge's: no attributes from the user's working tree or info/.
    return mergedir.merge_tree(
        repo,
        _oid(repo, head),
        _oid(repo, task_commit),
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
    )


def _oid(repo: Repository, rev: str) -> str:
    """`rev` as a commit id (forge's merge git dir has no refs of the user's)."""
    return rev if _OID.match(rev) else repo.rev_parse(rev)


def _merged_or_conflicts(cp: proc.Completed, head: str) -> MergeResult | str:
    # NUL-separated: the tree, then one entry a conflicted path (any name git can store).
    lines = [entry.strip("\n") for entry in cp.stdout.split("\0")]
    lines = [entry for entry in lines if entry]
    if cp.returncode == 1:
        conflicts = tuple(dict.fromkeys(lines[1:]))
        return MergeResult(merged=False, conflicts=conflicts)
    if cp.returncode != 0 or not lines:
        why = " ".join(cp.stderr.split())[:200] or f"exit {cp.returncode}"
        return MergeResult(merged=False, refused=f"cannot be merged onto {head[:12]}: {why}")
    return lines[0].strip()


def merge_commits(repo: Repository, ours: str, theirs: str, *, message: str) -> MergeResult:
    """The merge commit of `theirs` into `ours`, written to the object store only: no
    ref moves and no working tree is touched (`forge combine` lands it after a gate)."""
    found = _merged_or_conflicts(_merge_tree(repo, ours, theirs), ours)
    if isinstance(found, MergeResult):
        if found.conflicts:
            return found
        raise ForgeError(f"git merge-tree failed on {theirs[:12]}: {found.refused}")
    commit = repo.git(
        "commit-tree", found, "-p", ours, "-p", theirs, "-m", message, env=identity_env(repo)
    ).strip()
    return MergeResult(merged=True, commit=commit)


def commit_chain(repo: Repository, parent: str, steps: list[tuple[str, str]]) -> list[str]:
    """Commits written with plumbing on no ref, one per (tree, message) of `steps`,
    each on the one before and the first on `parent`."""
    made: list[str] = []
    env = identity_env(repo)
    for tree, message in steps:
        parent = repo.git("commit-tree", tree, "-p", parent, "-m", message, env=env).strip()
        made.append(parent)
    return made


def landed_tasks(
    repo: Repository, revs: str, paths: list[str] | tuple[str, ...], *, plan: str
) -> list[str]:
    """The tasks of `plan` whose landing commits (first parents of `revs`, newest
    first, at most 50) changed any of `paths`."""
    from forge.git import trailers

    if not paths:
        return []
    cp = repo.try_git(
        "log", "-z", "--first-parent", "--max-count=50", "--format=%B", revs, "--", *paths
    )
    found = [trailers.facts(m) for m in cp.stdout.split("\0") if m.strip()]
    return list(dict.fromkeys(f.task for f in found if f is not None and f.plan == plan))


def conflict_reason(paths: Sequence[str], by: Sequence[str] = ()) -> str:
    """The paths, and the landed tasks that changed them since the task's base (`by`)."""
    from forge.git.trailers import tasks_phrase

    reason = f"conflicts with integration in: {', '.join(paths[:8])}"
    return reason + (f" (changed by landed {tasks_phrase(list(by))})" if by else "")
