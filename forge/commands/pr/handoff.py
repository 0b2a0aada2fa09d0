"""`forge pr`: hand a plan's verified integration head to the code host as one pull
request, opened once and updated in place by later calls.

Only a head the gate verified is pushed, to branch `forge/<plan>` of the remote,
leased on what forge last pushed there (`pr.json`, written before each push). A
branch someone else moved, a pull request a person closed, a token without rights
or a host that does not answer: one line, and nothing half done."""

from __future__ import annotations

from dataclasses import replace

from forge.commands.pr.session import (
    METHODS,
    Handed,
    PrOptions,
    Say,
    Session,
    connect,
    exit_code,
    leased_push,
    pr_lock,
    refresh,
    state_lines,
)
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git.repo import Repository, short_sha
from forge.host import record as records
from forge.host.api import NewPull, PrState, PullRequest, Repo
from forge.host.record import PrRecord
from forge.host.story import body_of, title_of
from forge.run.state.run_state import RunState
from forge.run.state.store import StateStore
from forge.verify.records import Verdict


def hand_off(repo: Repository, plan: str, opts: PrOptions, *, say: Say) -> Handed:
    with pr_lock(repo, plan):
        return _hand_off(repo, plan, opts, say=say)


@frozen
class Opened:
    """What both hand-offs start from: the plan's state, its verified head, the
    host's session and what the host says of the repository."""

    state: RunState
    head: str
    session: Session
    info: Repo


def open_hand_off(repo: Repository, plan: str, opts: PrOptions, *, say: Say) -> Opened:
    """Check the options and the plan, connect, and make sure the token may push."""
    if opts.merge_method is not None and opts.merge_method not in METHODS:
        raise ForgeError(f"--merge-method must be one of {', '.join(METHODS)}")
    state = StateStore(repo.state, plan).load_existing()
    if state is None:
        raise ForgeError(f"plan '{plan}' has not run yet: run `forge run {plan}` first")
    head = verified_head(repo, plan, state)
    session = connect(repo, state, opts, say=say)
    info = session.host.repository()
    if not info.can_push:
        raise ForgeError(
            f"the token cannot push to {session.target.slug}: it needs write access "
            "(Contents and Pull requests)"
        )
    return Opened(state, head, session, info)


def _hand_off(repo: Repository, plan: str, opts: PrOptions, *, say: Say) -> Handed:
    opened = open_hand_off(repo, plan, opts, say=say)
    state, head, session, repo_info = opened.state, opened.head, opened.session, opened.info
    rec = records.load(repo.state, plan)
    if rec is not None and rec.remote != opts.remote:
        rec = None  # another remote: a hand-off of its own
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
        from forge.commands.pr.watch import watch

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
    ours = {sha for sha in (rec.pushed, rec.pushing) if sha}

    def intent() -> None:
        records.save(session.repo.state, plan, replace(rec, pushing=head))

    leased_push(session, (rec.remote, rec.branch), head, ours, intent=intent)
    rec = replace(rec, pushed=head, pushing=None)
    records.save(session.repo.state, plan, rec)
    return rec


def _answer(plan: str, rec: PrRecord, lines: list[str]) -> Handed:
    return Handed(plan, rec, lines, exit_code(rec))
