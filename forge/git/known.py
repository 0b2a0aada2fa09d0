"""What forge knows about commits without asking git: the tree and the parents of
the commits it wrote itself (or read once). A commit id names its tree and parents
for good, so a fact remembered here never goes stale; the table is bounded, and a
commit it does not hold is git's to answer."""

from __future__ import annotations

import re
import threading
from typing import TypeVar

V = TypeVar("V")

_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_LIMIT = 4096
_lock = threading.Lock()
_trees: dict[str, str] = {}
_parents: dict[str, tuple[str, ...]] = {}
_merged: dict[str, bool] = {}  # commits forge merged into another (second parents)


def _keep(table: dict[str, V], key: str, value: V) -> None:
    with _lock:
        if len(table) >= _LIMIT:
            table.pop(next(iter(table)))
        table[key] = value


def remember(commit: str, *, tree: str, parents: tuple[str, ...] | None = None) -> None:
    """Record the tree (and, when known, the parents) of the commit `commit`."""
    if not (_OID.match(commit) and _OID.match(tree)):
        return
    _keep(_trees, commit, tree)
    if parents is not None and all(_OID.match(p) for p in parents):
        _keep(_parents, commit, parents)
        for merged in parents[1:]:
            _keep(_merged, merged, True)


def tree(commit: str) -> str | None:
    with _lock:
        return _trees.get(commit)


def child_of(commit: str, parent: str) -> bool:
    """Whether `parent` is known to be one of `commit`'s parents (False: unknown)."""
    with _lock:
        return parent in _parents.get(commit, ())


def unmerged_own(commit: str) -> bool:
    """Whether forge wrote `commit` itself (its parents are known) and has merged it
    into nothing since: it cannot be in any branch forge merges into."""
    with _lock:
        return commit in _parents and commit not in _merged
