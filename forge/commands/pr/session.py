"""One `forge pr`: its options, the host it talks to, and the pull request's state
as the host says it (saved in `pr.json`, read back by `forge status`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from forge.base.clock import now_iso
from forge.errors import Busy, ExitCode, ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository, short_sha
from forge.host import record as records
from forge.host.api import CheckState, CodeHost
from forge.host.auth import find_token, push_env
from forge.host.push import push_leased, remote_head, remote_url
from forge.host.record import HostedVerdict, PrRecord
from forge.host.target import HostTarget, target_of
from forge.plan.cluster_table import HostTable
from forge.run.state.run_state import RunState

METHODS = ("merge", "squash", "rebase")
Say = Callable[[str], None]


@frozen
class PrOptions:
    remote: str = "origin"
    base: str | None = None
    draft: bool = False
    auto_merge: bool = False
    merge_method: str | None = None
    watch: bool = False


@frozen
class Handed:
    """What `forge pr` did, for the person and for scripts."""

    plan: str
    record: PrRecord
    lines: list[str]
    code: ExitCode

    stack: dict[str, PrRecord] | None = None  # --per-task: each landed task's, bottom first

    def to_dict(self) -> dict[str, object]:
        out = {"plan": self.plan, **self.record.to_dict(), "exit_code": int(self.code)}
        if self.stack is not None:
            out["stack"] = [{"task": t, **r.to_dict()} for t, r in self.stack.items()]
        return out


@frozen
class Session:
    """One `forge pr`: the plan's state, the host and where the push goes."""

    repo: Repository
    state: RunState
    host: CodeHost
    target: HostTarget
    table: HostTable
    push_env: dict[str, str]
    auto_merge: bool = False  # a merge was asked: --watch waits for it
    notify: str | None = None  # the plan's (or forge.toml's) notify command


def connect(repo: Repository, state: RunState, opts: PrOptions, *, say: Say) -> Session:
    from forge.host.github import connect as github
    from forge.plan import registry
    from forge.plan.repo_config import load_repo_config

    config = load_repo_config(repo.main_root, read_agents=False)
    table = config.host
    notify = registry.load_recorded(repo, state.plan).plan.notify or config.notify
    remote = opts.remote
    url = remote_url(repo, remote)
    target = target_of(remote, url, table)
    token = find_token(target)
    if token.from_actions:
        say(
            f"warning: the token ({token.source}) looks like GitHub Actions' own GITHUB_TOKEN: "
            "a push made with it starts no workflow, so the pull request's checks may not run"
        )
    host = github(target, token, table)
    return Session(repo, state, host, target, table, push_env(token, url), opts.auto_merge, notify)


def refresh(session: Session, plan: str, rec: PrRecord) -> PrRecord:
    """The pull request's state, checks and review as the host says them now, saved;
    a failing check on forge's head becomes a verdict `hosted: NAME` of that head."""
    rec = fetch(session, rec)
    records.save(session.repo.state, plan, rec)
    return rec


def fetch(session: Session, rec: PrRecord) -> PrRecord:
    """`rec` as the host says it now (not saved)."""
    assert rec.number is not None
    host = session.host
    pull = host.pull(rec.number)
    checks = host.checks(pull.head_sha) if pull.head_sha else []
    review = host.review_decision(rec.number)
    verdicts = list(rec.verdicts)
    known = {(v.lane, v.commit) for v in verdicts}
    for check in checks:
        lane = f"hosted: {check.name}"
        if check.state == CheckState.FAILED and (lane, pull.head_sha) not in known:
            verdicts.append(
                HostedVerdict(
                    lane,
                    pull.head_sha,
                    pull.base,
                    check.summary,
                    check.url,
                    now_iso(),
                    pull.base_sha,
                )
            )
    rec = replace(
        rec,
        state=str(pull.state),
        checks=checks,
        review=review,
        mergeable=pull.mergeable,
        merge_commit=pull.merge_commit,
        verdicts=verdicts,
    ).fetched_now()
    return rec


def state_lines(rec: PrRecord) -> list[str]:
    out = [f"pull request {rec.summary()}"]
    for check in rec.checks:
        if check.state == CheckState.FAILED:
            out.append(
                f"FAIL hosted: {check.name} on {short_sha(rec.pushed)}"
                + (f": {check.summary}" if check.summary else "")
                + (f" ({check.url})" if check.url else "")
            )
    if rec.mergeable == "dirty":
        out.append(
            f"#{rec.number} conflicts with {rec.base}: set the plan's base to the new "
            f"{rec.base}, `forge plan` and `forge run` again, then `forge pr`"
        )
    return out


def exit_code(rec: PrRecord) -> ExitCode:
    failing = any(c.state == CheckState.FAILED for c in rec.checks)
    if failing or rec.review == "CHANGES_REQUESTED" or rec.mergeable == "dirty":
        return ExitCode.FAILED
    return ExitCode.OK


def leased_push(
    session: Session,
    where: tuple[str, str],
    head: str,
    ours: set[str],
    *,
    intent: Callable[[], None],
) -> None:
    """Push `head` to branch `where[1]` of remote `where[0]`, leased on where the
    branch is now, which must be absent or a commit forge pushed (`ours`); `intent`
    records the push before it is made."""
    repo, (remote, branch) = session.repo, where
    at = remote_head(repo, remote, branch, session.push_env)
    if at == head:
        return
    if at is not None and at not in ours:
        raise ForgeError(
            f"branch {branch} on '{remote}' is at {short_sha(at)}, which forge did not push: "
            "forge does not overwrite it (delete that branch, or hand off from another remote)"
        )
    intent()
    push_leased(repo, remote, (head, branch), at, session.push_env)


@contextmanager
def pr_lock(repo: Repository, plan: str) -> Iterator[None]:
    """One `forge pr` of a plan at a time: two would race on its branch and record."""
    from filelock import FileLock, Timeout

    folder = repo.state.plan_dir(plan)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / "pr.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise Busy(f"another `forge pr` of plan '{plan}' is running; wait for it") from None
    try:
        yield
    finally:
        lock.release()
