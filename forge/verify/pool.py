"""Shared verification checkouts: `forge verify` outside a plan and the hooks (a
background verification after a commit, the one before a push) verify with the same
`[verify]` of forge.toml, so they take their checkouts from one pool instead of
paying `setup` (a virtualenv, a build) in three sets of checkouts.

The pool is keyed by what makes a checkout's contents differ: the setup and the env
(each lane has a folder of its own in a member). A member is held by one
verification at a time (a lock per member, not one for all): a second verification
running at once takes, or makes, another member. Beyond `MAX_MEMBERS` members, the
least recently used idle one is removed.

    <worktrees root>/.verify/shared-<setup and env>-<n>/<lane>
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from forge.base.files import read_json_or, write_json
from forge.git.repo import Repository
from forge.plan.repo_config import VerifyConfig

SHARED_KEYS = frozenset({"cli", "hook", "push"})  # forge verify, post-commit, pre-push
MAX_MEMBERS = 3  # members a pool keeps; the least recently used idle one goes first
_PREFIX = "shared-"


def pool_name(config: VerifyConfig) -> str:
    """The pool of checkouts that can serve this config: same setup, same env."""
    what = json.dumps([config.setup, [list(kv) for kv in config.env]])
    return _PREFIX + hashlib.sha256(what.encode()).hexdigest()[:12]


@contextlib.contextmanager
def checkouts_for(repo: Repository, key: str, config: VerifyConfig) -> Iterator[str]:
    """The checkout key a verification of `key` uses, held until it ends: `key`
    itself for a plan's, a free member of the shared pool for the others."""
    if key not in SHARED_KEYS:
        yield key
        return
    from filelock import FileLock, Timeout

    pool = pool_name(config)
    locks = repo.state.verify_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        member = f"{pool}-{n}"
        lock = FileLock(str(locks / f"{member}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            n += 1
            continue
        break
    try:
        _used(repo, member, key)
        _evict(repo, pool, keep=member)
        yield member
    finally:
        lock.release()


def _book(repo: Repository, member: str) -> Path:
    return repo.state.verify_dir / "pool" / f"{member}.json"


def _used(repo: Repository, member: str, key: str) -> None:
    """Who used the member (what `forge status --disk` counts it for), and when."""
    book = _book(repo, member)
    data = read_json_or(book, None, what="verification pool entry")
    users = set(data.get("users", [])) if isinstance(data, dict) else set()
    write_json(book, {"users": sorted(users | {key}), "used": time.time()})


def _evict(repo: Repository, pool: str, *, keep: str) -> None:
    """Remove the least recently used idle members beyond MAX_MEMBERS."""
    from filelock import FileLock, Timeout

    books = repo.state.verify_dir / "pool"
    members = []
    for book in books.glob(f"{pool}-*.json"):
        data = read_json_or(book, None, what="verification pool entry")
        used = float(data.get("used", 0.0)) if isinstance(data, dict) else 0.0
        members.append((used, book.stem))
    members.sort(reverse=True)
    for _, member in members[MAX_MEMBERS:]:
        if member == keep:
            continue
        lock = FileLock(str(repo.state.verify_dir / "locks" / f"{member}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue  # in use: not idle
        try:
            remove(repo, member)
        finally:
            lock.release()


def empty(repo: Repository) -> list[str]:
    """`forge clean --pool`: every member no verification holds, removed; what was done."""
    from filelock import FileLock, Timeout

    root = repo.worktrees_root() / ".verify"
    members = (
        sorted(p.name for p in root.glob(f"{_PREFIX}*") if p.is_dir()) if root.is_dir() else []
    )
    notes = []
    for member in members:
        lock = FileLock(str(repo.state.verify_dir / "locks" / f"{member}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            notes.append(f"kept {root / member}: a verification is running in it")
            continue
        try:
            remove(repo, member)
        finally:
            lock.release()
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
