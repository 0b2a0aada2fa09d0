"""`forge verify`: which commit, with which config, and how the result reads."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from forge.frozen import frozen
from forge.git.refs import integration_ref
from forge.git.repo import Repository, short_sha
from forge.plan.repo_config import VerifyConfig, load_repo_config
from forge.verify.records import Verdict, VerifyRecord

CLI_KEY = "cli"  # the checkouts of `forge verify` outside a plan


@frozen
class Target:
    rev: str
    config: VerifyConfig | None
    plan: str | None  # the plan whose verification this is, if any
    key: str
    sandbox: bool = False  # the plan's `sandbox`: lanes run under bubblewrap


def resolve_target(repo: Repository, *, rev: str | None, plan_ref: str | None) -> Target:
    """REV (default: the plan's integration head, else HEAD) and the config: the
    plan's `verify`, else `[verify]` in forge.toml."""
    from forge.errors import ForgeError
    from forge.plan.registry import resolve

    repo_config = load_repo_config(repo.root, read_agents=False)  # once a command
    if plan_ref is None:
        config = repo_config.verify
        plans = repo.state.recorded_plans()
        if config is not None or len(plans) != 1:
            return Target(rev or "HEAD", config, None, CLI_KEY)
        # No repository-wide verification, one plan: its verification is what the
        # user means (answering UNVERIFIED would ask them to set what the plan has).
        plan = resolve(repo, plans[0]).plan
        if plan.verify is None:
            return Target(rev or "HEAD", None, None, CLI_KEY)
        if rev is not None or repo.ref_value(integration_ref(plan.name)) is None:
            return Target(rev or "HEAD", repo_config.with_settings(plan.verify), None, CLI_KEY)
        plan_ref = plan.name

    plan = resolve(repo, plan_ref).plan
    config = plan.verify_under(repo_config)
    if rev is None:
        rev = integration_ref(plan.name)
        if repo.ref_value(rev) is None:
            raise ForgeError(
                f"plan '{plan.name}' has no integration branch yet: run `forge run {plan.name}`"
            )
    from forge.base import sandbox

    return Target(rev, config, plan.name, plan.name, sandbox=sandbox.choose(None, plan.sandbox).on)


@contextlib.contextmanager
def plan_context(repo: Repository, plan: str | None) -> Iterator[None]:
    """Hold the plan's run lock while verifying it, so the verdict written into its
    state cannot race a `forge run` of the same plan."""
    if plan is None:
        yield
        return
    from forge.base.files import plan_lock

    with plan_lock(repo.state, plan, command="forge verify"):
        yield


def record_in_plan(repo: Repository, plan: str, record: VerifyRecord) -> bool:
    """Make the plan's state carry this verification (what `forge accept` checks),
    and say whether it did. Only a verification of the integration head counts:
    `forge verify --plan P OLDER_COMMIT` must not vouch for what accept would land."""
    from forge.run.state import events as ev
    from forge.run.state.store import StateStore

    store = StateStore(repo.state, plan)
    state = store.load_existing()
    if state is None:
        return False
    head = repo.ref_value(f"{state.integration}^{{commit}}")
    if head is None or head != record.commit:
        return False
    store.record(state, ev.VerificationRecorded(record))
    return True


@frozen
class Verified:
    record: VerifyRecord
    stopped: bool  # a signal stopped the verification


def verify(
    repo: Repository,
    *,
    rev: str | None,
    plan_ref: str | None,
    force: bool,
    on_event: Callable[[str], None] | None,
    warn: Callable[[str], None],
) -> Verified:
    """`forge verify`: verify the target under the plan's lock (Ctrl-C stops every
    lane) and record the verdict in the plan when it judged its integration head."""
    from forge.base import interrupt
    from forge.verify.engine import Ask, verify_commit

    target = resolve_target(repo, rev=rev, plan_ref=plan_ref)
    with interrupt.on_stop_signals() as stop, plan_context(repo, target.plan):
        record = verify_commit(
            repo,
            target.rev,
            target.config,
            key=target.key,
            stop=stop,
            ask=Ask(force=force, on_event=on_event, sandbox=target.sandbox, remembered_fail=True),
        )
        if target.plan is not None and not record_in_plan(repo, target.plan, record):
            warn(
                f"{short_sha(record.commit)} is not the integration head of plan '{target.plan}': "
                f"its verdict is not recorded in the plan"
            )
    return Verified(record, stop.is_set())


def raise_for_verdict(verified: Verified) -> None:
    """The verdict as the contract's exit code: INTERRUPTED, FAILED, or nothing."""
    from forge.errors import ExitCode, ForgeError, Interrupted
    from forge.verify.engine import describe_failure

    if verified.stopped or verified.record.verdict == Verdict.INTERRUPTED:
        raise Interrupted("verification interrupted: every lane's processes were stopped")
    if verified.record.verdict == Verdict.FAIL:
        raise ForgeError(describe_failure(verified.record), code=ExitCode.FAILED)
    if verified.record.verdict == Verdict.EMPTY:
        raise ForgeError(
            f"verification {verified.record.summary}: a lane that runs tests ran none; "
            f"set `allow_empty = true` in its [verify.lanes.NAME] table if that is right",
            code=ExitCode.FAILED,
        )


def render(record: VerifyRecord) -> list[str]:
    lines: list[str] = []
    for lane in record.lanes:
        lines += lane.lines()
    where = f"{short_sha(record.commit)} (tree {short_sha(record.tree)})"
    if record.verdict == Verdict.UNVERIFIED:
        lines.append(
            f"verification UNVERIFIED on {where}: no verify command is configured "
            f"(set [verify] in forge.toml or `verify` in the plan)"
        )
    elif record.cached:
        lines.append(
            f"verification {record.summary} on {where}: remembered verdict of verification "
            f"{record.id} (`--force` runs it again)"
        )
    else:
        lines.append(f"verification {record.summary} on {where} in {record.duration:.1f}s")
    return lines
