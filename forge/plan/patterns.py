"""File patterns: what a task's `files` entry names, for scope and for overlap.

One reading for both questions forge asks of a pattern: does it allow changing a
path (the scope check after an attempt, `covers`), and can two patterns name a
common path (the scheduler keeps such tasks apart, `patterns_overlap`). The two
must agree: a path a pattern covers is a path it overlaps (tests/plan/test_dag.py
checks it over random patterns).

- A plain path covers itself and everything under it, compared by components
  (`src/app` covers `src/app/x.py`, not `src/application.py`); `.` covers all.
- A glob (`*`, `?`, `[`) matches as fnmatch does, against the path and each folder
  above it; fnmatch's `*` also matches `/`, so a glob may reach any depth.

Overlap is judged conservatively: two patterns overlap unless their leading literal
components prove they cannot name a common path. Past the first component holding
a glob character nothing is proved; only that component's literal start still
counts (`test_a*` cannot name `test_b.py`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

GLOB_CHARS = frozenset("*?[")


def normalize_pattern(pattern: str) -> str:
    """`./a//b/` -> `a/b`; the empty path and `./` -> `.` (the whole tree)."""
    parts = [p for p in pattern.strip().split("/") if p not in ("", ".")]
    return "/".join(parts) or "."


def is_glob(pattern: str) -> bool:
    return any(ch in GLOB_CHARS for ch in pattern)


def _components(pattern: str) -> list[str]:
    norm = normalize_pattern(pattern)
    return [] if norm == "." else norm.split("/")


def _literal_start(component: str) -> str:
    for i, ch in enumerate(component):
        if ch in GLOB_CHARS:
            return component[:i]
    return component


def covers(pattern: str, path: str) -> bool:
    """Does a declared `files` entry allow changing `path`?"""
    pattern = normalize_pattern(pattern)
    if pattern == ".":
        return True
    if path == pattern or path.startswith(pattern + "/"):
        return True
    if is_glob(pattern):
        parts = path.split("/")
        return any(
            fnmatch.fnmatchcase("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1)
        )
    return False


def out_of_scope(files: Iterable[str], changed: Iterable[str]) -> list[str]:
    """The changed paths no declared pattern covers, in their order."""
    patterns = list(files)
    return [p for p in changed if not any(covers(f, p) for f in patterns)]


def patterns_overlap(a: str, b: str) -> bool:
    """Can patterns `a` and `b` name a common path? (True when unsure.)"""
    ca, cb = _components(a), _components(b)
    for x, y in zip(ca, cb, strict=False):
        gx, gy = is_glob(x), is_glob(y)
        if not gx and not gy:
            if x != y:
                return False
            continue
        # A glob's match at this depth starts with its literal start, and cannot be
        # narrowed further (its `*` may span `/`): compare the starts, then give up.
        px, py = _literal_start(x), _literal_start(y)
        if gx and gy:
            return px.startswith(py) or py.startswith(px)
        # A literal component must be named whole: it has to start with the glob's start.
        return y.startswith(px) if gx else x.startswith(py)
    # One is a leading part of the other: a path covers everything under it.
    return True
