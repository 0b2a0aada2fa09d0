"""What a run must leave of the user's repository: refs, HEAD, config, attributes,
the index, what `git status` shows and every object file's content, read as bytes
(a file name need not be UTF-8)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def git_bytes(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "absent"


def user_side(repo: Path) -> dict[str, object]:
    gd = repo / ".git"
    store = gd / "objects"
    return {
        "HEAD": _sha(gd / "HEAD"),
        "config": _sha(gd / "config"),
        "info": {n: _sha(gd / "info" / n) for n in ("attributes", "exclude", "grafts")},
        "index": _sha(gd / "index"),
        "refs": git_bytes(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "status": git_bytes(repo, "status", "--porcelain", "-z", "--untracked-files=all"),
        "objects": {
            str(p.relative_to(store)): _sha(p)
            for p in store.rglob("*")
            if p.is_file() and p.parent.name != "info"
        },
    }


def unchanged_but_new(before: dict[str, object], after: dict[str, object]) -> dict[str, object]:
    """`after` with the objects a run added left out (forge adds objects; it must not
    rewrite or remove one) and forge's own refs ignored."""
    had, has = before["objects"], after["objects"]
    assert isinstance(had, dict) and isinstance(has, dict)
    refs = after["refs"]
    assert isinstance(refs, bytes)
    mine = b"\n".join(line for line in refs.splitlines() if b"refs/heads/forge/" not in line)
    return {**after, "objects": {k: has.get(k, "absent") for k in had}, "refs": mine}


def comparable(before: dict[str, object]) -> dict[str, object]:
    return unchanged_but_new(before, before)
