"""`forge combine NEW A B ...`: one integration branch holding several plans' work.

Each plan's integration head is merged with plumbing (merge-tree, commit-tree) onto
the heads' common base, one plan after another, in no working tree. The candidate is
verified and `forge/NEW-integration` moves to it only when it passed (the gate any
landing goes through); NEW is then recorded as a plan without tasks of its own, so
`forge status NEW` shows it and `forge accept NEW` lands the whole.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from forge.base.clock import now_iso
from forge.base.files import plan_lock
from forge.errors import ExitCode, ForgeError, Interrupted
from forge.frozen import frozen
from forge.git.merge import is_ancestor, merge_commits
from forge.git.refs import integration_ref
from forge.git.repo import Repository
from forge.plan import registry
from forge.plan.registry import Recorded
from forge.plan.repo_config import VerifyConfig, load_repo_config
from forge.run.state.run_state import RunState
from forge.run.state.store import StateStore
from forge.verify.records import VerifyRecord

GOOD = ("PASS", "FLAKY", "UNVERIFIED")


@dataclass
class Combination:
    name: str
    heads: dict[str, str]  # plan -> its integration head, in the order given
    base: str
    commit: str  # the candidate: every plan merged onto the base
    skipped: list[str] = field(default_factory=list)  # plans already held by those before
    verification: VerifyRecord | None = None


def _recorded(repo: Repository, ref: str) -> Recorded:
    # A plan's file may have changed since its run: its integration head is still its work.
    if ref in repo.state.recorded_plans():
        return registry.load_recorded(repo, ref)
    return registry.resolve(repo, ref)


def _check_new(repo: Repository, name: str, plans: list[str]) -> Recorded | None:
    """Refuse a NEW that would clobber something; an earlier combination of that name
    is combined again (its branch moves, gated like any landing)."""
    registry.check_name(repo, name)
    if name in plans:
        raise ForgeError(f"plan '{name}' cannot be combined into itself; name a new plan")
    if name in repo.state.recorded_plans():
        old = registry.load_recorded(repo, name)
        if not old.combined:
            raise ForgeError(
                f"plan '{name}' is already recorded (and was not made by `forge combine`); "
                f"name a new plan"
            )
        return old
    ref = integration_ref(name)
    if repo.ref_value(ref) is not None:
        raise ForgeError(
            f"branch {ref.removeprefix('refs/heads/')} already exists; name a new plan"
        )
    return None


def candidate(repo: Repository, name: str, plans: list[Recorded]) -> Combination:
    """Merge the plans' integration heads onto their common base; a conflict is a
    ForgeError (exit 5) naming the plans and paths. Writes objects only."""
    names = [p.name for p in plans]
    heads: dict[str, str] = {}
    for p in plans:
        head = repo.ref_value(integration_ref(p.name))
        if head is None:
            raise ForgeError(
                f"plan '{p.name}' has no integration branch yet: run `forge run {p.name}`"
            )
        heads[p.name] = head
    cp = repo.try_git("merge-base", "--octopus", *heads.values())
    if cp.returncode != 0 or not cp.stdout.strip():
        raise ForgeError(f"plans {', '.join(names)} share no history: nothing to combine onto")
    base = cp.stdout.strip()
    combo = Combination(name=name, heads=heads, base=base, commit=base)
    merged: list[str] = []
    for plan, head in heads.items():
        if is_ancestor(repo, head, combo.commit):
            combo.skipped.append(plan)  # its work is already there
            continue
        result = merge_commits(
            repo, combo.commit, head, message=f"forge: combine plan {plan} into {name}"
        )
        if not result.merged:
            raise _conflict(repo, base, heads, merged, plan, result.conflicts)
        assert result.commit is not None
        combo.commit = result.commit
        merged.append(plan)
    return combo


def _conflict(
    repo: Repository,
    base: str,
    heads: dict[str, str],
    before: list[str],
    plan: str,
    paths: tuple[str, ...],
) -> ForgeError:
    """Which earlier plans the conflict is with: those that changed its paths."""
    touched: dict[str, set[str]] = {}
    for other in before:
        out = repo.git("diff", "--name-only", "-z", "--no-renames", base, heads[other])
        touched[other] = set(out.split("\0"))
    others = [o for o in before if touched[o] & set(paths)] or before
    shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
    with_ = " and ".join(f"'{o}'" for o in others)
    return ForgeError(
        f"plan '{plan}' conflicts with plan {with_} on {shown}; nothing was written "
        f"(resolve it in one of the plans, e.g. a task that changes those files, and "
        f"combine again)",
        code=ExitCode.FAILED,
    )


def _config(repo: Repository, first: Recorded, command: str | None) -> VerifyConfig | None:
    if command is not None:
        return VerifyConfig(lanes=(("verify", command),))
    if first.plan.verify is not None:
        return first.plan.verify
    return load_repo_config(repo.root).verify


@frozen
class Combining:
    """How plans are combined: `verify`, a command to verify with instead of the
    configured verification (`--verify`); `dry_run`, say what would happen only."""

    verify: str | None = None
    dry_run: bool = False


def combine(
    repo: Repository,
    name: str,
    refs: list[str],
    asked: Combining,
    *,
    stop: threading.Event,
    on_event: Callable[[str], None],
) -> list[str]:
    """Combine, verify, land and record; the lines that say what happened."""
    verify, dry_run = asked.verify, asked.dry_run
    if len(refs) < 2:
        raise ForgeError("name at least two plans to combine")
    plans = [_recorded(repo, ref) for ref in refs]
    names = [p.name for p in plans]
    if len(set(names)) != len(names):
        raise ForgeError(f"a plan is named twice: {', '.join(names)}")
    old = _check_new(repo, name, names)
    combo = candidate(repo, name, plans)
    first = plans[0]
    config = _config(repo, first, verify)
    how = (
        "take it unverified (no verification is configured)"
        if config is None
        else "verify it (" + "; ".join(f"{lane}: {cmd}" for lane, cmd in config.lanes) + ")"
    )
    lines = [
        f"{p} at {h[:12]}"
        + (" (already held by the plans before it)" if p in combo.skipped else "")
        for p, h in combo.heads.items()
    ]
    short = integration_ref(name).removeprefix("refs/heads/")
    if dry_run:
        return [
            *lines,
            f"the plans merge cleanly onto their common base {combo.base[:12]}",
            f"would {how}, then point {short} at the result and record plan '{name}'",
            "dry run: nothing was written",
        ]
    with plan_lock(repo.state, name, command="forge combine"):
        from forge.verify.engine import Ask, describe_failure, verify_commit

        on_event(f"combination {combo.commit[:12]}: {how}")
        record = verify_commit(
            repo, combo.commit, config, key=name, stop=stop, ask=Ask(on_event=on_event)
        )
        if stop.is_set() or record.verdict == "INTERRUPTED":
            raise Interrupted(f"verification interrupted: {short} was not moved")
        if record.verdict not in GOOD:
            raise ForgeError(
                f"{describe_failure(record)}; {short} was not moved and '{name}' not recorded",
                code=ExitCode.FAILED,
            )
        combo.verification = record
        _land(repo, combo, first, old, config if verify is not None else None)
    return [
        *lines,
        f"verification {record.verdict} on {combo.commit[:12]}",
        f"{short} is at {combo.commit[:12]}: plan '{name}' is recorded; "
        f"`forge accept {name}` lands the whole",
    ]


def _land(
    repo: Repository,
    combo: Combination,
    first: Recorded,
    old: Recorded | None,
    verify: VerifyConfig | None,
) -> None:
    """Record the plan, move its branch (expecting it where it was), then the state
    that vouches for the head: each write before what depends on it."""
    name = combo.name
    plan = replace(
        first.plan,
        name=name,
        source=None,
        base=combo.base,
        tasks=(),
        verify=verify if verify is not None else first.plan.verify,
    )
    recorded = Recorded(
        plan=plan,
        source_path=None,
        source_sha256="",
        base_ref=f"the common base of {', '.join(combo.heads)}",
        base_commit=combo.base,
        waves=(),
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        combined=dict(combo.heads),
    )
    registry.store(repo, recorded, locked=True)
    ref = integration_ref(name)
    was = repo.ref_value(ref)
    if old is None and was is not None:
        raise ForgeError(f"branch {ref.removeprefix('refs/heads/')} appeared meanwhile")
    repo.update_ref(ref, combo.commit, was, message=f"forge: combine {', '.join(combo.heads)}")
    now = now_iso()
    state = RunState(
        plan=name,
        integration=ref,
        tasks={},
        verification=combo.verification,
        started=now,
        finished=now,
    )
    StateStore(repo.state, name).save(state)
