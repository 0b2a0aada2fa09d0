"""Shared verification checkouts: every plan of a repository (its gate, speculation,
bisection), `forge verify` outside a plan and the hooks (a background verification
after a commit, the one before a push) take their checkouts from one pool, instead
of paying `setup` (a virtualenv, a build) in a set of checkouts each.

The pool is keyed by what makes a checkout's contents differ: the setup and the env;
in a member each lane has a checkout (a folder) of its own. A member is held by one
verification at a time (a lock per member, not one for all): a second verification
running at once (another plan's, a speculation, the hooks') takes, or makes, another
member. Beyond `verify_pool_max` members of one key (forge.toml, default 3), the
least recently used idle one is removed.

    <worktrees root>/.verify/shared-<setup and env>-<n>/<lane>

Each member's book (`<git common dir>/forge/verify/pool/<member>.json`) says who
used it (the verification keys: a plan's name, `<plan>.spec1`, `cli`, `hook`,
`push`) and when: what `forge status --disk` counts it for, and what `forge clean
PLAN` leaves to the others.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base.files import read_json_or, write_json
from forge.errors import ForgeError
from forge.git.repo import Repository
from forge.plan.repo_config import DEFAULT_POOL_MAX, VerifyConfig

if TYPE_CHECKING:
    from filelock import FileLock

SHARED_KEYS = frozenset({"cli", "hook", "push"})  # forge verify, post-commit, pre-push
_PREFIX = "shared-"
_DERIVED = re.compile(r"\.(spec|bisect|best)\d+$")  # a plan's other verification keys


def pool_name(config: VerifyConfig) -> str:
    """The pool of checkouts that can serve this config: same setup, same env."""
    what = json.dumps([config.setup, [list(kv) for kv in config.env]])
    return _PREFIX + hashlib.sha256(what.encode()).hexdigest()[:12]


def pool_max(repo: Repository, config: VerifyConfig) -> int:
    """`verify_pool_max` of forge.toml: as read with `config` (a run's, at its
    start), else read now (checked where forge.toml is read; a file edited into
    something unreadable since keeps the default here)."""
    if config.pool_max is not None:
        return config.pool_max
    from forge.plan.repo_config import load_repo_config

    try:
        return load_repo_config(repo.root, read_agents=False).verify_pool_max
    except ForgeError:
        return DEFAULT_POOL_MAX


def plan_of(key: str) -> str | None:
    """The plan a verification key is for (None: `forge verify` or a hook)."""
    return None if key in SHARED_KEYS else _DERIVED.sub("", key)


def _lock(repo: Repository, member: str) -> FileLock:
    from filelock import FileLock

    locks = repo.state.verify_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return FileLock(str(locks / f"{member}.lock"))


def _take(repo: Repository, member: str) -> FileLock | None:
    """The member's lock, taken without waiting (None: a verification holds it)."""
    from filelock import Timeout

    lock = _lock(repo, member)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    return lock


@contextlib.contextmanager
def _held(repo: Repository, member: str) -> Iterator[bool]:
    """The member's lock while it is free: whether it was."""
    lock = _take(repo, member)
    try:
        yield lock is not None
    finally:
        if lock is not None:
            lock.release()


@contextlib.contextmanager
def checkouts_for(repo: Repository, key: str, config: VerifyConfig) -> Iterator[str]:
    """The member of the pool a verification of `key` uses, held until it ends: the
    most recently used free one (its setup most likely done), else a new one."""
    pool = pool_name(config)
    known = [member for _used, member in _members(repo, pool)]
    lock, member = None, ""
    for member in known:
        lock = _take(repo, member)
        if lock is not None:
            break
    n = 0
    while lock is None:  # every member busy: a new one (the first name nobody holds)
        n += 1
        member = f"{pool}-{n}"
        if member not in known:
            lock = _take(repo, member)
    try:
        _used(repo, member, key)
        _evict(repo, pool, keep=member, limit=pool_max(repo, config))
        yield member
    finally:
        lock.release()


def _book(repo: Repository, member: str) -> Path:
    return repo.state.verify_dir / "pool" / f"{member}.json"


def _read(repo: Repository, member: str) -> tuple[float, list[str]]:
    data = read_json_or(_book(repo, member), None, what="verification pool entry")
    if not isinstance(data, dict):
        return 0.0, []
    return float(data.get("used", 0.0)), [str(u) for u in data.get("users", [])]


def _members(repo: Repository, pool: str) -> list[tuple[float, str]]:
    """The pool's members with a book, the most recently used first."""
    books = repo.state.verify_dir / "pool"
    found = [(_read(repo, b.stem)[0], b.stem) for b in books.glob(f"{pool}-*.json")]
    return sorted(found, reverse=True)


def _used(repo: Repository, member: str, key: str) -> None:
    """Who used the member (what `forge status --disk` counts it for), and when."""
    _, users = _read(repo, member)
    write_json(_book(repo, member), {"users": sorted({*users, key}), "used": time.time()})


def _evict(repo: Repository, pool: str, *, keep: str, limit: int) -> None:
    """Remove the least recently used idle members beyond `limit`."""
    for _, member in _members(repo, pool)[limit:]:
        if member == keep:
            continue
        with _held(repo, member) as free:
            if free:  # in use: not idle
                remove(repo, member)


def users(repo: Repository) -> dict[str, list[str]]:
    """Every member with a book: the verification keys that used it."""
    books = repo.state.verify_dir / "pool"
    return {b.stem: _read(repo, b.stem)[1] for b in sorted(books.glob(f"{_PREFIX}*.json"))}


def used_by(repo: Repository, plan: str) -> list[Path]:
    """The members the plan's verifications used (for `forge status --disk`)."""
    root = repo.worktrees_root() / ".verify"
    return [
        root / member
        for member, keys in users(repo).items()
        if any(plan_of(k) == plan for k in keys) and (root / member).is_dir()
    ]


def _others(keys: list[str], plan: str) -> str:
    plans = sorted({p for k in keys if (p := plan_of(k)) is not None and p != plan})
    named = [f"plan {p}" for p in plans]
    if {"hook", "push"} & set(keys):
        named.append("the hooks")
    if "cli" in keys:
        named.append("`forge verify`")
    return ", ".join(named)


def release(repo: Repository, plan: str, *, dry_run: bool = False) -> list[str]:
    """`forge clean PLAN`: the members only the plan used are removed; those another
    plan or the hooks use too are left to them (the plan no longer counted as a user)."""
    root = repo.worktrees_root() / ".verify"
    notes = []
    for member, keys in users(repo).items():
        if not any(plan_of(k) == plan for k in keys):
            continue
        folder = root / member
        others = _others(keys, plan)
        if others:
            verb = "would keep" if dry_run else "kept"
            notes.append(f"{verb} shared verification checkouts {folder}: used by {others} too")
            if not dry_run:
                used, _ = _read(repo, member)
                rest = sorted(k for k in keys if plan_of(k) != plan)
                write_json(_book(repo, member), {"users": rest, "used": used})
            continue
        if dry_run:
            notes.append(f"would remove shared verification checkouts {folder}")
            continue
        existed = folder.is_dir()
        with _held(repo, member) as free:
            if not free:
                notes.append(f"kept {folder}: a verification is running in it")
                continue
            remove(repo, member)
        if existed:
            notes.append(f"removed shared verification checkouts {folder}")
    return notes


def empty(repo: Repository) -> list[str]:
    """`forge clean --pool`: every member no verification holds, removed; what was done."""
    root = repo.worktrees_root() / ".verify"
    members = (
        sorted(p.name for p in root.glob(f"{_PREFIX}*") if p.is_dir()) if root.is_dir() else []
    )
    notes = []
    for member in members:
        with _held(repo, member) as free:
            if not free:
                notes.append(f"kept {root / member}: a verification is running in it")
                continue
            remove(repo, member)
        notes.append(f"removed shared verification checkouts {root / member}")
    return notes or ["no shared verification checkouts: nothing to remove"]


def remove(repo: Repository, member: str) -> None:
    """A member's checkouts and forge's books of them."""
    from forge.git import worktrees
    from forge.git.contained import VIEW_SUFFIX

    folder = repo.worktrees_root() / ".verify" / member
    for lane in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not lane.name.endswith(VIEW_SUFFIX):
            with contextlib.suppress(Exception):  # removed below whatever it holds
                worktrees.remove(repo, lane)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(repo.state.verify_dir / "checkouts" / member, ignore_errors=True)
    _book(repo, member).unlink(missing_ok=True)
