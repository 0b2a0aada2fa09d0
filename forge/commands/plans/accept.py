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
import hashlib
import textwrap
from typing import TYPE_CHECKING, Literal

from forge.base import proc
from forge.base.files import plan_lock
from forge.errors import Busy, ExitCode, ForgeError
from forge.frozen import frozen
from forge.git import gitfiles, objstore, refs, trailers
from forge.git.merge import is_ancestor
from forge.git.repo import Repository, short_sha
from forge.run.state import accepted
from forge.run.state.records import VerifiedBy
from forge.run.state.run_state import RunState, Status, TaskState
from forge.run.state.store import StateStore
from forge.verify.records import Verdict

if TYPE_CHECKING:
    from forge.plan.model import Task

Squash = Literal["task", "plan"]  # --squash: one commit a task; --squash-plan: one for all
How = Literal["already", "fast-forward", "merge", "squash"]


@frozen
class Accepted:
    """What `forge accept` did: said as text, or as JSON (`--json`)."""

    plan: str
    branch: str
    how: How
    commit: str  # the branch's tip afterwards
    integration: str  # the integration head brought in
    landed: list[str]  # tasks brought in, as `plan/task`
    not_landed: list[TaskState]
    text: str

    def as_json(self) -> dict[str, object]:
        return {
            "plan": self.plan,
            "branch": self.branch,
            "how": self.how,
            "commit": self.commit,
            "integration": self.integration,
            "landed": self.landed,
            "not_landed": [
                {"task": t.id, "status": str(t.status), "reason": t.reason} for t in self.not_landed
            ],
        }


def accept(
    repo: Repository, plan: str, *, merge: bool, now: bool = False, squash: Squash | None = None
) -> Accepted:
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(plan_lock(repo.state, plan, command="forge accept"))
        except Busy as busy:
            if not now:
                raise ForgeError(
                    f"{busy.message}; `forge accept` waits for the run to end, or "
                    f"`forge accept {plan} --now` brings in the head verified so far"
                ) from None
            return _accept(repo, plan, merge=merge, running=True, squash=squash)
        return _accept(repo, plan, merge=merge, running=False, squash=squash)
    raise AssertionError("unreachable")  # pragma: no cover (mypy: ExitStack may swallow)


def _accept(
    repo: Repository, plan: str, *, merge: bool, running: bool, squash: Squash | None
) -> Accepted:
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
    note = _note(state, unmerged, verdict)

    def done(how: How, text: str, landed: list[str]) -> Accepted:
        tip = repo.git("rev-parse", "HEAD").strip()
        said = text + note + _said_landed(landed) + _not_landed(unmerged)
        return Accepted(plan, branch, how, tip, head, landed, unmerged, said)

    if is_ancestor(repo, head, user_head) or accepted.squashed_in(repo, plan, head, user_head):
        return done("already", f"{branch} already contains {short}", [])
    orig_head = repo.ref_value("ORIG_HEAD")
    if squash is not None:
        made = squash_into(
            repo, state, head=head, user_head=user_head, merge=merge, one=squash == "plan"
        )
        text = _bring_in(
            repo, branch, made, user_head=user_head, orig_head=orig_head, running=running
        )
        return done("squash", text, [f"{plan}/{t}" for t in made.tasks])
    if is_ancestor(repo, user_head, head):
        cp = repo.try_git("merge", "--ff-only", "--quiet", head)
        if cp.returncode != 0:
            _restore_orig_head(repo, orig_head)
            raise ForgeError(f"git refused to fast-forward {branch}: {_why(cp)}")
        if running:
            accepted.record(repo.state, plan, ref=f"refs/heads/{branch}", old=user_head, new=head)
        text = f"fast-forwarded {branch} to {short} ({short_sha(head)})"
        return done("fast-forward", text, _landed(repo, user_head, head))
    if not merge:
        raise ForgeError(
            f"{branch} has moved since the plan's base, so it cannot be fast-forwarded to "
            f"{short}; use `forge accept --merge` for a merge commit"
        )
    _merge(repo, short, branch, head, orig_head=orig_head, message=f"forge: accept plan {plan}")
    if running:
        new = repo.git("rev-parse", "HEAD").strip()
        accepted.record(repo.state, plan, ref=f"refs/heads/{branch}", old=user_head, new=new)
    return done("merge", f"merged {short} into {branch}", _landed(repo, user_head, head))


def _merge(
    repo: Repository, short: str, branch: str, head: str, *, orig_head: str | None, message: str
) -> None:
    """`git merge --no-ff` of the integration head; a refusal leaves all as it was and
    says what conflicted (not the `Auto-merging` git prints first)."""
    cp = repo.try_git("merge", "--no-ff", "--quiet", "-m", message, head)
    if cp.returncode == 0:
        return
    conflicts = _conflicts(cp)
    repo.try_git("merge", "--abort")
    _restore_orig_head(repo, orig_head)
    if conflicts:
        raise ForgeError(
            f"{short} and {branch} both changed {conflicts}: git cannot merge them, and "
            f"{branch} is left as it was; merge by hand (`git merge {short}`) to resolve it"
        )
    raise ForgeError(f"git could not merge {short} into {branch}: {_why(cp)}")


def _objects_unchanged(plan: str, state: RunState) -> None:
    """No branch moves onto history whose objects changed under the run."""
    for line in state.touched or []:
        if line.startswith(gitfiles.CHANGED):
            raise ForgeError(
                f"{line} during the run of '{plan}' and still so: put them back as they "
                f"were (or check them), then `forge run {plan}` measures again and accept "
                "goes ahead"
            )
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


def _bring_in(
    repo: Repository,
    branch: str,
    made: SquashMade,
    *,
    user_head: str,
    orig_head: str | None,
    running: bool,
) -> str:
    """Move the user's branch (and checkout) onto the squashed commits, as git would:
    a fast-forward onto commits built on its tip, or a merge of them."""
    plan, tip = made.plan, made.commits[-1]
    if made.onto == user_head:
        cp = repo.try_git("merge", "--ff-only", "--quiet", tip)
    else:
        message = f"Accept plan {plan} (squashed)"
        cp = repo.try_git("merge", "--no-ff", "--quiet", "-m", message, tip)
    if cp.returncode != 0:
        if made.onto != user_head:
            repo.try_git("merge", "--abort")
        _restore_orig_head(repo, orig_head)
        raise ForgeError(f"git refused to bring the squashed plan into {branch}: {_why(cp)}")
    new = repo.git("rev-parse", "HEAD").strip()
    accepted.record_squash(repo.state, plan, made.head, commits=made.commits, branch=branch)
    if running:
        accepted.record(repo.state, plan, ref=f"refs/heads/{branch}", old=user_head, new=new)
    how = "one commit" if len(made.commits) == 1 else f"{len(made.commits)} commits"
    return f"squashed {plan} into {branch} as {how} ({short_sha(new)})"


def _note(state: RunState, unmerged: list[TaskState], verdict: Verdict | None) -> str:
    note = ""
    if unmerged:
        names = ", ".join(t.id for t in unmerged)
        note = f" ({len(unmerged)} task(s) not merged: {names})"
    if verdict == Verdict.UNVERIFIED:
        note += " (not verified: no verify command is configured)"
    if verdict == Verdict.FLAKY:
        note += _flaky_note(state)
    return note


def _flaky_note(state: RunState) -> str:
    """A FLAKY head said as such: which lanes passed only on a rerun."""
    record = state.verification
    lanes = [lane.name for lane in record.lanes if lane.verdict == Verdict.FLAKY] if record else []
    what = "lane " if len(lanes) == 1 else "lanes "
    where = f": {what}{', '.join(lanes)} passed only on a rerun" if lanes else ""
    return f" (verification FLAKY{where})"


def _not_landed(tasks: list[TaskState]) -> str:
    return "".join(
        f"\nnot landed: {t.id} ({t.status}" + (f": {t.reason})" if t.reason else ")") for t in tasks
    )


def _landed(repo: Repository, before: str, head: str) -> list[str]:
    found = [trailers.facts(m) for _, m in reversed(repo.first_parent_commits(before, head))]
    return [f"{f.plan}/{f.task}" for f in found if f is not None]


def _said_landed(names: list[str]) -> str:
    return f"\nlanded {len(names)} task(s): {', '.join(names)}" if names else ""


def _conflicts(cp: proc.Completed) -> str:
    """The paths a merge left in conflict, with git's kind of conflict: `a.txt
    (content)`; "" when git said no CONFLICT line (its first line is the reason then,
    not the `Auto-merging` it prints before one)."""
    found = []
    for line in f"{cp.stdout}\n{cp.stderr}".splitlines():
        kind, sep, rest = line.removeprefix("CONFLICT (").partition("): ")
        if line.startswith("CONFLICT (") and sep:
            path = rest.rsplit(" in ", 1)[-1].strip()
            found.append(f"{path} ({kind})")
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    return ", ".join(found[:8]) + more


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


@frozen
class SquashMade:
    plan: str
    head: str  # the integration head squashed
    onto: str  # the commit the first squashed commit sits on
    commits: list[str]
    tasks: list[str]


def squash_into(
    repo: Repository,
    state: RunState,
    *,
    head: str,
    user_head: str,
    merge: bool,
    one: bool,
) -> SquashMade:
    """The plan's landed work as new commits (one a task, or `one` for all) built with
    plumbing on the user's tip (on the fork point when the user's branch moved and
    `merge` allows a merge of them)."""
    plan = state.plan
    if is_ancestor(repo, user_head, head):
        onto = user_head
    elif merge:
        onto = repo.git("merge-base", user_head, head).strip()
    else:
        raise ForgeError(
            f"your branch has moved since the plan's base, so the squashed commits cannot go "
            f"on its tip; `forge accept {plan} --squash --merge` merges them"
        )
    from forge.git.merge import commit_chain
    from forge.plan.registry import load_recorded

    tasks = {t.id: t for t in load_recorded(repo, plan).plan.tasks}
    verified = f"{state.verification.verdict if state.verification else 'UNVERIFIED'} {head[:12]}"
    end = [(trailers.INTEGRATION, head)]
    steps: list[tuple[str, str]] = []
    landed: list[tuple[str, str]] = []  # (task, title)
    for commit, message in reversed(repo.first_parent_commits(onto, head)):
        facts = trailers.facts(message)
        task = tasks.get(facts.task) if facts is not None and facts.plan == plan else None
        if facts is None or task is None:  # not one task's landing: kept as it reads
            steps.append((repo.tree_of(commit), message))
            continue
        landed.append((task.id, task.title or task.id))
        ts = state.tasks.get(task.id)
        by = ts.verified_by if ts is not None else None
        said = _verified_trailer(by) if by else verified
        facts_of = [(trailers.PLAN, plan), (trailers.TASK, task.id)]
        if facts.attempt is not None:
            facts_of.append((trailers.ATTEMPT, str(facts.attempt)))
        facts_of += [(trailers.PROMPT, _digest(task)), (trailers.VERIFIED, said), *end]
        body = _prompt_digest(task)
        steps.append(
            (
                repo.tree_of(commit),
                trailers.compose(trailers.subject(task.title, task.id), facts_of, body=body),
            )
        )
    if not steps:
        raise ForgeError(f"plan '{plan}' has nothing to squash between your branch and its head")
    if one:
        titles = "; ".join(title for _, title in landed) or f"plan {plan}"
        listing = "\n".join(f"- {title} ({tid})" for tid, title in landed)
        all_of = [(trailers.PLAN, plan), *((trailers.TASK, tid) for tid, _ in landed)]
        all_of += [(trailers.VERIFIED, verified), *end]
        subject = trailers.subject(f"{plan}: {titles}", plan)
        steps = [(repo.tree_of(head), trailers.compose(subject, all_of, body=listing))]
    chain = commit_chain(repo, onto, steps)
    return SquashMade(plan, head, onto, chain, [tid for tid, _ in landed])


def _digest(task: Task) -> str:
    text = task.prompt or task.run or ""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


COMMAND_LINES = 12  # of a shell task's command in a squashed commit's body


def _prompt_digest(task: Task) -> str:
    """The prompt (or command) in a few lines a person reads in `git log`: a prompt
    reflowed, a command as written (its line breaks are its meaning: a heredoc made one
    paragraph is another command), indented, its first lines."""
    if task.prompt or not task.run:
        return textwrap.fill(textwrap.shorten(task.prompt or "", 280, placeholder=" …"), 72)
    lines = task.run.strip("\n").splitlines()
    shown = [f"    {line}".rstrip() for line in lines[:COMMAND_LINES]]
    more = len(lines) - COMMAND_LINES
    cut = [f"    … ({more} more line{'s' if more > 1 else ''})"] if more > 0 else []
    return "\n".join(["run:", *shown, *cut])


def _verified_trailer(by: VerifiedBy) -> str:
    """`PASS 1a2b3c4d5e6f`, with the tests its whole run left out (and why) or the
    flaky ones it passed despite: `PASS 1a2b3c4d5e6f (1 deselected: T (quarantined,
    flaky))`."""
    said = f"{by.verdict} {str(by.commit)[:12]}"
    summary = by.summary or ""
    if summary.startswith(f"{by.verdict} ("):
        said += summary[len(by.verdict) :]
    return said
