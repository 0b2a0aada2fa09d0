"""Each worktree has an environment of its own: the plan's `env` and its `setup`.

An editable install in a shared environment points at whichever worktree
installed last, and verification then imports another tree's code. So `setup`
runs in every checkout forge runs commands in (task slots and verification
checkouts alike), once per checkout and again when the setup or the env changes,
and `env` values may name the worktree: `PATH = "{worktree}/.venv/bin:$PATH"`.

What setup made in a slot is recorded file by file when it ends (forge's git dir
of the slot keeps the record, out of a sandboxed task's reach): a task that writes
a `.pth` into the slot's `.venv` would run its code in every later task's commands
there. Before each task, what differs is named, setup's products are removed and
setup runs again.

A setup belongs to its folder: a virtualenv names its folder in every script's
shebang and in an editable install's `.pth`. So the record of a setup names the
folder it ran in, and a checkout that has moved (a slot taken over from another
plan) has not been set up: what setup made there is removed and setup runs again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from forge.base.text import one_line
from forge.git import contained, taskgit
from forge.verify import hermetic

_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_MARKER = "forge-setup"
_PRODUCTS = "forge-setup-products"  # what setup made in a slot, file by file
_NAMED = 3  # changed paths named in a warning


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


def _record(worktree: Path) -> list[str] | None:
    """The setup record of the worktree: [digest, folder] (None: none)."""
    admin = _admin_dir(worktree)
    if admin is None:
        return None
    try:
        return (admin / _MARKER).read_text().rstrip("\n").split("\n", 1)
    except OSError:
        return None


def is_set_up(worktree: Path, digest: str) -> bool:
    """Whether the setup of `digest` ran in this folder, here (not before a move)."""
    return _record(worktree) == [digest, os.path.abspath(worktree)]


def moved(worktree: Path) -> bool:
    """Whether a setup ran in this checkout at another folder (or forge's record of
    it does not say where): what it made may name that folder."""
    record = _record(worktree)
    return record is not None and record[1:] != [os.path.abspath(worktree)]


def forget(worktree: Path) -> None:
    """What setup made here has been removed: no record of it stays."""
    admin = _admin_dir(worktree)
    if admin is not None:
        (admin / _MARKER).unlink(missing_ok=True)


def mark_set_up(worktree: Path, digest: str) -> None:
    admin = _admin_dir(worktree)
    if admin is not None:
        (admin / _MARKER).write_text(f"{digest}\n{os.path.abspath(worktree)}\n")


def record_products(worktree: Path) -> None:
    """After setup ran in the slot at `worktree`: what it made (the ignored paths
    there now), file by file."""
    admin = contained.view_dir(worktree)
    if not taskgit.is_dir(admin):
        return
    paths = hermetic.untracked(worktree, admin, ignored=True)
    entries = hermetic.products_entries(worktree, paths, by_ctime=True)
    (admin / _PRODUCTS).write_text(json.dumps({"paths": paths, "entries": entries}))


def _products(worktree: Path) -> tuple[list[str], dict[str, str]] | None:
    try:
        data = json.loads((contained.view_dir(worktree) / _PRODUCTS).read_text())
        return [str(p) for p in data["paths"]], {str(k): str(v) for k, v in data["entries"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def products_changed(worktree: Path) -> list[str]:
    """The paths of setup's products in the slot that differ from what setup left
    (added, removed or changed); empty when there is no record."""
    found = _products(worktree)
    if found is None:
        return []
    paths, was = found
    now = hermetic.products_entries(worktree, paths, by_ctime=True)
    return sorted(p for p in now.keys() | was.keys() if now.get(p) != was.get(p))


def remove_products(worktree: Path) -> None:
    """Remove what setup made in the slot (before it runs again), and its record."""
    found = _products(worktree)
    for rel in found[0] if found is not None else []:
        taskgit.remove(worktree / rel.rstrip("/"))
    (contained.view_dir(worktree) / _PRODUCTS).unlink(missing_ok=True)
    forget(worktree)


def products_warning(changed: list[str]) -> str:
    """What a task's result says when setup's products had changed before it."""
    named = ", ".join(one_line(p) for p in changed[:_NAMED])
    more = f" and {len(changed) - _NAMED} more" if len(changed) > _NAMED else ""
    return f"setup's products changed since setup ran ({named}{more}): removed, setup ran again"
