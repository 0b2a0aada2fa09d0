"""`forge pr`: hand a plan's verified integration head to the code host as one pull
request, opened once and updated in place by later calls.

Only a head the gate verified is pushed, to branch `forge/<plan>` of the remote,
leased on what forge last pushed there (`pr.json`, written before each push). A
branch someone else moved, a pull request a person closed, a token without rights
or a host that does not answer: one line, and nothing half done."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from forge.errors import ExitCode, ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository, short_sha
from forge.host import record as records
from forge.host.api import CheckState, CodeHost, NewPull, PrState, PullRequest
from forge.host.auth import find_token, push_env
from forge.host.push import push_leased, remote_head, remote_url
from forge.host.record import HostedVerdict, PrRecord
from forge.host.story import body_of, title_of
from forge.host.target import HostTarget, target_of
from forge.plan.host_table import HostTable
from forge.run.state.run_state import RunState
from forge.run.state.store import StateStore
from forge.verify.records import Verdict

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

    def to_dict(self) -> dict[str, object]:
        return {"plan": self.plan, **self.record.to_dict(), "exit_code": int(self.code)}


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


def hand_off(repo: Repository, plan: str, opts: PrOptions, *, say: Say) -> Handed:
    if opts.merge_method is not None and opts.merge_method not in METHODS:
        raise ForgeError(f"--merge-method must be one of {', '.join(METHODS)}")
    state = StateStore(repo.state, plan).load_existing()
    if state is None:
        raise ForgeError(f"plan '{plan}' has not run yet: run `forge run {plan}` first")
    head = verified_head(repo, plan, state)
    session = connect(repo, state, opts, say=say)
    rec = records.load(repo.state, plan)
    if rec is not None and rec.remote != opts.remote:
        rec = None  # another remote: a hand-off of its own
    repo_info = session.host.repository()
    if not repo_info.can_push:
        raise ForgeError(
            f"the token cannot push to {session.target.slug}: it needs write access "
            "(Contents and Pull requests)"
        )
    base = opts.base or (rec.base if rec else None) or repo_info.default_branch
    rec = rec or PrRecord(opts.remote, session.target.slug, f"forge/{plan}", base)
    rec = replace(rec, base=base)
    pull = _existing(session, rec, head)
    if pull is not None and pull.state == PrState.MERGED:
        rec = replace(rec, state=str(pull.state), merge_commit=pull.merge_commit).fetched_now()
        records.save(repo.state, plan, rec)
        return _answer(plan, rec, [f"pull request #{pull.number} is merged: {pull.url}"])
    rec = _push(session, plan, rec, head)
    new = NewPull(
        title_of(state), body_of(state, head), head=rec.branch, base=base, draft=opts.draft
    )
    if pull is None:
        pull = session.host.find_pull(rec.branch)
    if pull is None:
        pull = session.host.open_pull(new)
        did = f"opened pull request #{pull.number}: {pull.url}"
    else:
        pull = session.host.update_pull(pull.number, new)
        did = f"updated pull request #{pull.number}: {pull.url}"
    rec = replace(rec, number=pull.number, url=pull.url, state=str(pull.state))
    records.save(repo.state, plan, rec)
    lines = [did]
    if opts.auto_merge:
        session.host.auto_merge(pull, opts.merge_method)
        lines.append(f"asked {session.target.host} to merge #{pull.number} when its rules allow")
    rec = refresh(session, plan, rec)
    if opts.watch:
        from forge.commands.pr_watch import watch

        return watch(session, plan, rec, lines, say=say)
    return _answer(plan, rec, [*lines, *state_lines(rec)])


def verified_head(repo: Repository, plan: str, state: RunState) -> str:
    """The integration head, when the gate verified it: only that is handed off."""
    head = repo.ref_value(state.integration)
    if head is None:
        raise ForgeError(f"plan '{plan}' has no integration branch: run `forge run {plan}`")
    record = state.verification
    if record is not None and record.commit == head and record.verdict == Verdict.UNVERIFIED:
        raise ForgeError(
            f"plan '{plan}' has no verification (UNVERIFIED): forge hands off only what its "
            "gate verified; set `verify` in the plan or [verify] in forge.toml, then `forge run`"
        )
    if record is None or record.commit != head or not record.verdict.ok:
        said = "never verified" if record is None else f"last verified {record.verdict}"
        if record is not None and record.commit != head:
            said = "moved since its last verification"
        raise ForgeError(
            f"integration head {short_sha(head)} of plan '{plan}' is not verified ({said}): "
            f"`forge run {plan}` or `forge verify --plan {plan}` first; only verified work "
            "is handed off"
        )
    if not state.verification_sealed:
        raise ForgeError(f"plan '{plan}': its verification record does not carry forge's seal")
    return head


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


def _existing(session: Session, rec: PrRecord, head: str) -> PullRequest | None:
    if rec.number is None:
        return None
    pull = session.host.pull(rec.number)
    if pull.state == PrState.CLOSED:
        raise ForgeError(
            f"pull request #{rec.number} was closed without a merge (by a person): forge leaves "
            "it closed; reopen it on the host to hand off again"
        )
    if pull.state == PrState.MERGED and rec.pushed != head:
        return None  # merged, and the plan went on: its new work gets a new pull request
    return pull


def _push(session: Session, plan: str, rec: PrRecord, head: str) -> PrRecord:
    repo, remote, branch = session.repo, rec.remote, rec.branch
    at = remote_head(repo, remote, branch, session.push_env)
    if at == head:
        rec = replace(rec, pushed=head, pushing=None)
        records.save(repo.state, plan, rec)
        return rec
    ours = {rec.pushed, rec.pushing} - {None}
    if at is not None and at not in ours:
        raise ForgeError(
            f"branch {branch} on '{remote}' is at {short_sha(at)}, which forge did not push: "
            "forge does not overwrite it (delete that branch, or hand off from another remote)"
        )
    records.save(repo.state, plan, replace(rec, pushing=head))
    push_leased(repo, remote, (head, branch), at, session.push_env)
    rec = replace(rec, pushed=head, pushing=None)
    records.save(repo.state, plan, rec)
    return rec


def refresh(session: Session, plan: str, rec: PrRecord) -> PrRecord:
    """The pull request's state, checks and review as the host says them now, saved;
    a failing check on forge's head becomes a verdict `hosted: NAME` of that head."""
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
                HostedVerdict(lane, pull.head_sha, pull.base, check.summary, check.url, _now())
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
    records.save(session.repo.state, plan, rec)
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


def _answer(plan: str, rec: PrRecord, lines: list[str]) -> Handed:
    return Handed(plan, rec, lines, exit_code(rec))


def _now() -> str:
    from forge.base.clock import now_iso

    return now_iso()
