"""`forge accept`: bring a verified integration branch into the user's branch.

The only command that touches the user's checkout, and it does so as git would:
`git merge --ff-only` (or `--no-ff` with --merge), which refuses rather than
overwrite uncommitted work. While the plan runs it refuses (the run holds the
plan's lock): what it would bring in is a part of the run, taken without a word.
With `--now` it brings in the head verified so far and records the move, so the
run does not report it as a change someone else made to the user's repository.
"""

from __future__ import annotations

import contextlib

from forge.base import proc
from forge.base.files import plan_lock
from forge.errors import Busy, ExitCode, ForgeError
from forge.git import objstore, refs
from forge.git.merge import is_ancestor
from forge.git.repo import Repository, short_sha
from forge.run.state import accepted
from forge.run.state.run_state import RunState, StateStore, Status, TaskState
from forge.verify.records import Verdict


def accept(repo: Repository, plan: str, *, merge: bool, now: bool = False) -> str:
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(plan_lock(repo.state, plan, command="forge accept"))
        except Busy as busy:
            if not now:
                raise ForgeError(
                    f"{busy.message}; `forge accept` waits for the run to end, or "
                    f"`forge accept {plan} --now` brings in the head verified so far"
                ) from None
            return _accept(repo, plan, merge=merge, running=True)
        return _accept(repo, plan, merge=merge, running=False)
    raise AssertionError("unreachable")  # pragma: no cover (mypy: ExitStack may swallow)


def _accept(repo: Repository, plan: str, *, merge: bool, running: bool) -> str:
    state = StateStore(repo.state, plan).load_existing()
    if state is None:
        raise ForgeError(f"plan '{plan}' has not run yet: run `forge run {plan}` first")
    _objects_unchanged(plan, state)
    head, verdict = _verified_head(repo, plan, state)
    branch = repo.current_branch()
    if branch is None:
        raise ForgeError("HEAD is detached: check out the branch to accept the plan into")
    short = refs.branch_name(state.integration)
    user_head = repo.git("rev-parse", "HEAD").strip()
    unmerged = [t for t in state.tasks.values() if t.status != Status.MERGED]
    note = ""
    if unmerged:
        names = ", ".join(t.id for t in unmerged)
        note = f" ({len(unmerged)} task(s) not merged: {names})"
    if verdict == Verdict.UNVERIFIED:
        note += " (not verified: no verify command is configured)"
    if is_ancestor(repo, head, user_head):
        return f"{branch} already contains {short}{note}" + _not_landed(unmerged)
    orig_head = repo.ref_value("ORIG_HEAD")
    if is_ancestor(repo, user_head, head):
        cp = repo.try_git("merge", "--ff-only", "--quiet", head)
        if cp.returncode != 0:
            _restore_orig_head(repo, orig_head)
            raise ForgeError(f"git refused to fast-forward {branch}: {_why(cp)}")
        if running:
            accepted.record(repo.state, plan, ref=f"refs/heads/{branch}", old=user_head, new=head)
        return (
            f"fast-forwarded {branch} to {short} ({short_sha(head)}){note}"
            + _landed(repo, user_head, head)
            + _not_landed(unmerged)
        )
    if not merge:
        raise ForgeError(
            f"{branch} has moved since the plan's base, so it cannot be fast-forwarded to "
            f"{short}; use `forge accept --merge` for a merge commit"
        )
    cp = repo.try_git("merge", "--no-ff", "--quiet", "-m", f"forge: accept plan {plan}", head)
    if cp.returncode != 0:
        repo.try_git("merge", "--abort")
        _restore_orig_head(repo, orig_head)
        raise ForgeError(f"git could not merge {short} into {branch}: {_why(cp)}")
    if running:
        new = repo.git("rev-parse", "HEAD").strip()
        accepted.record(repo.state, plan, ref=f"refs/heads/{branch}", old=user_head, new=new)
    return (
        f"merged {short} into {branch}{note}"
        + _landed(repo, user_head, head)
        + _not_landed(unmerged)
    )


def _objects_unchanged(plan: str, state: RunState) -> None:
    """No branch moves onto history whose objects changed under the run."""
    for line in state.touched or []:
        if line.startswith(objstore.CHANGED):
            raise ForgeError(
                f"{line} during the run of '{plan}': check your repository with "
                f"`git fsck`; once it finds nothing wrong, `forge run {plan}` measures "
                "again and accept goes ahead"
            )


def _verified_head(repo: Repository, plan: str, state: RunState) -> tuple[str, Verdict | None]:
    """The integration head and its verdict; a ForgeError unless it passed."""
    head = repo.ref_value(state.integration)
    if head is None:
        raise ForgeError(f"plan '{plan}' has no integration branch: run `forge run {plan}`")
    record = state.verification
    verdict = record.verdict if record is not None else None
    forged = record is not None and not state.verification_sealed
    if record is None or record.commit != head or not record.verdict.ok or forged:
        what = f"its last verification was {verdict}" if verdict else "it was never verified"
        if record is not None and record.commit and record.commit != head:
            what = "it moved since its last verification"
        if forged:
            what, verdict = "its verification record does not carry forge's seal", None
        raise ForgeError(
            f"integration head {short_sha(head)} of plan '{plan}' has not passed verification "
            f"({what}); run `forge run {plan}` or `forge verify --plan {plan}` first",
            code=ExitCode.FAILED if verdict == Verdict.FAIL else ExitCode.USAGE,
        )
    return head, verdict


def _not_landed(tasks: list[TaskState]) -> str:
    return "".join(
        f"\nnot landed: {t.id} ({t.status}" + (f": {t.reason})" if t.reason else ")") for t in tasks
    )


def _landed(repo: Repository, before: str, head: str) -> str:
    merges = [s for s in repo.first_parent_subjects(before, head) if s.startswith("forge: merge ")]
    if not merges:
        return ""
    names = [s.removeprefix("forge: merge ").split(" (")[0] for s in reversed(merges)]
    return f"\nlanded {len(names)} task(s): {', '.join(names)}"


def _why(cp: proc.Completed) -> str:
    """git's reason on one line, with the paths it lists (tab-indented) named, so the
    user knows which of their files are in the way."""
    lines = (cp.stderr or cp.stdout).rstrip().splitlines()
    if not lines:
        return f"exit {cp.returncode}"
    paths = [ln.strip() for ln in lines[1:] if ln.startswith("\t")]
    head = lines[0].strip().rstrip(":")
    if paths:
        shown = ", ".join(paths[:8]) + (f" and {len(paths) - 8} more" if len(paths) > 8 else "")
        return f"{head}: {shown} (move or commit them first)"
    return head


def _restore_orig_head(repo: Repository, old: str | None) -> None:
    """A refused merge still writes ORIG_HEAD; put it back, so a refusal leaves the
    repository exactly as it was."""
    if old is None:
        repo.try_git("update-ref", "--no-deref", "-d", "ORIG_HEAD")
    else:
        repo.try_git("update-ref", "--no-deref", "ORIG_HEAD", old)
