"""`forge accept`: bring a verified integration branch into the user's branch.

The only command that touches the user's checkout, and it does so as git would:
`git merge --ff-only` (or `--no-ff` with --merge), which refuses rather than
overwrite uncommitted work.
"""

from __future__ import annotations

from forge import proc
from forge.errors import ExitCode, ForgeError
from forge.git import Repository
from forge.integrate import is_ancestor
from forge.runstate import StateStore, Status

GOOD = ("PASS", "FLAKY", "UNVERIFIED")


def accept(repo: Repository, plan: str, *, merge: bool) -> str:
    state = StateStore(repo.state, plan).load_existing()
    if state is None:
        raise ForgeError(f"plan '{plan}' has not run yet: run `forge run {plan}` first")
    head = repo.ref_value(state.integration)
    if head is None:
        raise ForgeError(f"plan '{plan}' has no integration branch: run `forge run {plan}`")
    record = state.verification or {}
    verdict = record.get("verdict")
    if record.get("commit") != head or verdict not in GOOD:
        what = f"its last verification was {verdict}" if verdict else "it was never verified"
        if record.get("commit") and record.get("commit") != head:
            what = "it moved since its last verification"
        raise ForgeError(
            f"integration head {head[:12]} of plan '{plan}' has not passed verification "
            f"({what}); run `forge run {plan}` or `forge verify --plan {plan}` first",
            code=ExitCode.FAILED if verdict == "FAIL" else ExitCode.USAGE,
        )
    branch = repo.current_branch()
    if branch is None:
        raise ForgeError("HEAD is detached: check out the branch to accept the plan into")
    short = state.integration.removeprefix("refs/heads/")
    user_head = repo.git("rev-parse", "HEAD").strip()
    unmerged = [t.id for t in state.tasks.values() if t.status != Status.MERGED]
    note = f" ({len(unmerged)} task(s) not merged: {', '.join(unmerged)})" if unmerged else ""
    if is_ancestor(repo, head, user_head):
        return f"{branch} already contains {short}{note}"
    if is_ancestor(repo, user_head, head):
        cp = repo.try_git("merge", "--ff-only", "--quiet", head)
        if cp.returncode != 0:
            raise ForgeError(f"git refused to fast-forward {branch}: {_why(cp)}")
        return f"fast-forwarded {branch} to {short} ({head[:12]}){note}"
    if not merge:
        raise ForgeError(
            f"{branch} has moved since the plan's base, so it cannot be fast-forwarded to "
            f"{short}; use `forge accept --merge` for a merge commit"
        )
    cp = repo.try_git("merge", "--no-ff", "--quiet", "-m", f"forge: accept plan {plan}", head)
    if cp.returncode != 0:
        repo.try_git("merge", "--abort")
        raise ForgeError(f"git could not merge {short} into {branch}: {_why(cp)}")
    return f"merged {short} into {branch}{note}"


def _why(cp: proc.Completed) -> str:
    text = (cp.stderr or cp.stdout).strip().splitlines()
    return text[0] if text else f"exit {cp.returncode}"
