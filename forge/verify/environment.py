"""Each worktree has an environment of its own: the plan's `env` and its `setup`.

An editable install in a shared environment points at whichever worktree
installed last, and verification then imports another tree's code. So `setup`
runs in every checkout forge runs commands in (task slots and verification
checkouts alike), once per checkout and again when the setup or the env changes,
and `env` values may name the worktree: `PATH = "{worktree}/.venv/bin:$PATH"`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from forge.git import contained, taskgit

_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_MARKER = "forge-setup"


def expand(env: Iterable[tuple[str, str]] | Mapping[str, str], worktree: Path) -> dict[str, str]:
    """The plan's env for the worktree at `worktree`: `{worktree}` replaced by its
    path, `$VAR` and `${VAR}` by forge's own environment ("" when unset)."""
    items = env.items() if isinstance(env, Mapping) else env
    out: dict[str, str] = {}
    for name, value in items:
        value = value.replace("{worktree}", str(worktree))
        out[name] = _VAR.sub(lambda m: os.environ.get(m["braced"] or m["plain"], ""), value)
    return out


def setup_hash(setup: str | None, env: Iterable[tuple[str, str]] | Mapping[str, str]) -> str:
    items = sorted(env.items() if isinstance(env, Mapping) else env)
    return hashlib.sha256(json.dumps([setup, items]).encode()).hexdigest()[:16]


def _admin_dir(worktree: Path) -> Path | None:
    """forge's own git dir of the worktree, else its git directory (a linked
    worktree's `.git` is a file naming it): where the setup record lives, so it goes when the worktree goes and is
    never part of the tree itself."""
    view = contained.view_dir(worktree)  # forge's own git dir of a slot or checkout
    if taskgit.is_dir(view):
        return view
    dot_git = worktree / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8")
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    path = Path(text[len("gitdir: ") :].strip())
    return path if path.is_absolute() else (worktree / path).resolve()


def is_set_up(worktree: Path, digest: str) -> bool:
    admin = _admin_dir(worktree)
    if admin is None:
        return False
    try:
        return (admin / _MARKER).read_text().strip() == digest
    except OSError:
        return False


def mark_set_up(worktree: Path, digest: str) -> None:
    admin = _admin_dir(worktree)
    if admin is not None:
        (admin / _MARKER).write_text(digest + "\n")
