"""What forge does with the git dir a task or a verification keeps in its own
folder (`<slot>/.git`): it reads it only as files, never through git, and writes it
only by putting a new one in its place.

git run over that folder would read its config (filters, fsmonitor, hooks,
`diff.external`), its `info/attributes`, its `commondir` and alternates, and would
write through any link in it (`logs/HEAD`, `refs/forge`, `objects/ab`). So:

- `head` reads the commit it has checked out from `HEAD`, a loose ref or
  `packed-refs`, none of them through a link;
- `copy_objects` copies its loose objects and packs, regular files only, into a
  folder of forge's, from which `git fetch` (checking each object) brings them on;
- `replace` builds a fresh git dir in forge's own folder and renames it over the
  old one (a rename moves a link, never follows it); the old one is removed
  without following anything in it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from forge.frozen import frozen

_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_REF = re.compile(r"^refs/[A-Za-z0-9._/-]+$")
_MAX = 1 << 16  # HEAD or a loose ref: a line; packed-refs: read no more than this much


def is_dir(path: Path) -> bool:
    """A real directory (not a link to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _open_regular(path: Path) -> int | None:
    """A descriptor of the regular file at `path`, not opened through a link at its
    last step (nor a FIFO or device)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def read_file(path: Path, limit: int = _MAX) -> bytes | None:
    """The start of the regular file at `path` (see `_open_regular`)."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _copy_file(source: Path, dest: Path) -> bool:
    fd = _open_regular(source)
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as src, dest.open("wb") as out:
        shutil.copyfileobj(src, out)
    return True


def head(git_dir: Path) -> str | None:
    """The commit id the git dir has checked out (None: none that can be read)."""
    if not is_dir(git_dir):
        return None
    ref = "HEAD"
    for _ in range(3):  # HEAD -> a branch -> (rarely) a symbolic ref
        raw = read_file(git_dir / ref) if ref == "HEAD" or safe_ref(ref) else None
        text = raw.decode("ascii", "replace").strip() if raw is not None else None
        if text is None and ref != "HEAD":
            text = _packed(git_dir, ref)
        if text is None:
            return None
        if text.startswith("ref: "):
            ref = text[len("ref: ") :].strip()
            if not safe_ref(ref):
                return None
            continue
        return text if _OID.match(text) else None
    return None


def safe_ref(ref: str) -> bool:
    return bool(_REF.match(ref)) and ".." not in ref and "//" not in ref


def _packed(git_dir: Path, ref: str) -> str | None:
    raw = read_file(git_dir / "packed-refs", limit=1 << 24)
    for line in (raw or b"").decode("ascii", "replace").splitlines():
        oid, _, name = line.partition(" ")
        if name == ref and _OID.match(oid):
            return oid
    return None


def copy_objects(source: Path, dest: Path) -> int:
    """Copy the loose objects and packs (`.pack`, `.idx`) of the object folder
    `source` into `dest`; regular files only, no folder reached through a link.
    Returns how many files were copied."""
    n = 0
    if not is_dir(source):
        return 0
    with contextlib.suppress(OSError):
        for name in os.listdir(source):
            sub = source / name
            if len(name) == 2 and all(c in "0123456789abcdef" for c in name) and is_dir(sub):
                n += _copy_files(sub, dest / name, lambda f: len(f) in (38, 62))
            elif name == "pack" and is_dir(sub):
                n += _copy_files(sub, dest / "pack", lambda f: f.endswith((".pack", ".idx")))
    return n


def _copy_files(source: Path, dest: Path, wanted: Callable[[str], bool]) -> int:
    n = 0
    for name in os.listdir(source):
        if not wanted(name):
            continue
        dest.mkdir(parents=True, exist_ok=True)
        n += _copy_file(source / name, dest / name)
    return n


def remove(path: Path) -> None:
    """Remove whatever is at `path` (a link is removed, not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@frozen
class GitDirText:
    """What a fresh git dir holds: HEAD's text, the one branch it names (ref, oid),
    its config, its alternates, and the index to copy (when there is one)."""

    head_text: str
    branch: tuple[str, str] | None
    config: str
    alternates: str
    index: Path | None = None


def replace(git_dir: Path, staging: Path, text: GitDirText) -> None:
    """Put a fresh git dir at `git_dir`, built in `staging` (a folder of forge's on the
    same file system): HEAD, the one branch it names (in `packed-refs`: no folders to
    make), forge's config, alternates to the user's objects, and the index copied.
    The old one is removed in the background (removing folders is slow on some file
    systems, and nothing waits for it)."""
    head_text, branch, config, alternates = (
        text.head_text,
        text.branch,
        text.config,
        text.alternates,
    )
    index = text.index
    new = staging / "new"
    remove(new)
    staging.mkdir(parents=True, exist_ok=True)
    os.mkdir(new)
    (new / "objects" / "info").mkdir(parents=True)
    (new / "refs").mkdir()
    (new / "HEAD").write_text(head_text)
    if branch is not None:
        ref, oid = branch
        (new / "packed-refs").write_text(f"{oid} {ref}\n")
    (new / "config").write_text(config)
    (new / "objects" / "info" / "alternates").write_text(alternates)
    if index is not None and index.is_file():
        shutil.copyfile(index, new / "index")
    if os.path.lexists(git_dir):
        os.rename(git_dir, staging / f"old-{os.urandom(16).hex()}")
    os.rename(new, git_dir)
    _sweep(staging)


def _sweep(staging: Path) -> None:
    """Remove the old git dirs left in `staging`, in a thread of their own."""
    with contextlib.suppress(OSError):
        old = [staging / n for n in os.listdir(staging) if n.startswith("old-")]
        if old:
            threading.Thread(target=_remove_all, args=(old,), daemon=True).start()


def _remove_all(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            remove(path)
