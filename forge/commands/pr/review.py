"""`forge retry TASK --review`: a review of the plan's pull request becomes the
task's next prompt, the attempt goes through the gate, and the pull request is
updated, with a comment saying what forge did.

The review's comments (with their files and lines) are written for the attempt
before it starts (`reviews/TASK.md` in the plan's folder) and removed once the
pull request carries the answer."""

from __future__ import annotations

from forge.base.files import atomic_write_text
from forge.commands.pr.handoff import hand_off
from forge.commands.pr.session import PrOptions, Say, connect
from forge.errors import ExitCode, ForgeError
from forge.git.repo import Repository, short_sha
from forge.host import record as records
from forge.host.api import ReviewComment
from forge.run.attempt.feedback import review_file
from forge.run.state.store import StateStore


def take_review(repo: Repository, plan: str, task: str, *, say: Say) -> int:
    """Fetch what the host said of `task`'s work for its next attempt: the review's
    comments of its pull request (its own in a stack, else the plan's) and, in a
    stack, the checks its pull request was blamed for. How many things were said."""
    rec = records.load_stack(repo.state, plan).get(task) or records.load(repo.state, plan)
    if rec is None or rec.number is None:
        raise ForgeError(f"plan '{plan}' has no pull request: `forge pr {plan}` opens one")
    state = StateStore(repo.state, plan).load_existing()
    assert state is not None  # a pull request was opened from it
    session = connect(repo, state, PrOptions(remote=rec.remote), say=say)
    comments = session.host.review_comments(rec.number)
    if rec.branch.startswith("forge-stack/"):
        comments += [
            ReviewComment(v.lane, f"failed on this task's pull request: {v.summary} ({v.url})")
            for v in rec.verdicts
            if v.commit == rec.pushed
        ]
    if not comments:
        raise ForgeError(f"pull request #{rec.number} has no review comments to answer")
    atomic_write_text(review_file(repo, plan, task), render(comments))
    say(f"{len(comments)} comment(s) of #{rec.number} go to task '{task}'")
    return len(comments)


def render(comments: list[ReviewComment]) -> str:
    out = []
    for c in comments:
        where = f"{c.path}:{c.line}" if c.path and c.line else c.path or "the pull request"
        out.append(f"{c.author} on {where}:\n{c.body.strip()}\n")
    return "\n".join(out)


def answer_review(repo: Repository, plan: str, task: str, *, say: Say) -> list[str]:
    """After the retry landed: update the pull request, say so in it, and drop the
    review's file (it is answered)."""
    stacked = records.load_stack(repo.state, plan).get(task)
    rec = stacked or records.load(repo.state, plan)
    assert rec is not None and rec.number is not None
    if stacked is not None:
        from forge.commands.pr.stack import hand_off_stack

        handed = hand_off_stack(repo, plan, PrOptions(remote=rec.remote), say=say)
        rec = (handed.stack or {}).get(task, rec)
    else:
        handed = hand_off(repo, plan, PrOptions(remote=rec.remote, base=rec.base), say=say)
        rec = handed.record
    if handed.code == ExitCode.USAGE or rec.number is None:
        return handed.lines
    state = StateStore(repo.state, plan).load_existing()
    assert state is not None
    session = connect(repo, state, PrOptions(remote=rec.remote), say=say)
    head = rec.pushed
    session.host.comment(
        rec.number,
        f"forge ran task `{task}` again with this review's comments, through its gate; "
        f"the pull request now holds {short_sha(head)}.",
    )
    review_file(repo, plan, task).unlink(missing_ok=True)
    return handed.lines
