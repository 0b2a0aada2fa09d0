"""The layer store: read-only layers made once, beside forge's state, shared by
every plan and hook of the repository.

    <git common dir>/forge/layers/<kind>/base/<tree>/tree     a checkout of the tree
                                        base/<tree>/tree.git forge's git dir of it
                                        delta/<base>-<tree>/layer  a later tree over a base
                                        setup/<key>/layer    what setup added on top
                                        tmp/<pid>-<n>        a layer being made
                                        runs/<pid>-<n>       a run's upper layers

A layer is made under `tmp/` and renamed into place once complete: a half-made one
is never used, and removed once the process making it is gone. A layer in use is
pinned (a shared lock); the least recently used unpinned base layers beyond
`KEEP_BASES` are removed (and deltas past `KEEP_DELTAS`, or whose base is gone),
and `forge clean --pool` removes every unpinned one.
`<kind>` is `root` or `userns` (overlays made in a user namespace mark whiteouts
and opaque folders otherwise): layers of the other kind are never read.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from forge.base.proc import pid_alive
from forge.git import worktrees
from forge.git.contained import Contained
from forge.git.repo import Repository
from forge.layers.mode import Mode

KEEP_BASES = 8  # base layers kept beyond those in use
KEEP_DELTAS = 64  # delta layers (forge/layers/delta.py), each the size of its changes
_LOCK = ".lock"


def store_dir(repo: Repository) -> Path:
    """Where the repository's layers live (every kind)."""
    return repo.state.root / "layers"


def kind_dir(repo: Repository, mode: Mode) -> Path:
    return store_dir(repo) / ("userns" if mode.user_ns else "root")


def new_dir(root: Path, what: str) -> Path:
    """A new folder under `root/what`, named for this process (`sweep` removes it
    once the process is gone)."""
    parent = root / what
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1 << 30):
        path = parent / f"{os.getpid()}-{n}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")


def remove(path: Path) -> None:
    """Remove a folder of the store (an overlay's work folder is mode 000)."""
    with contextlib.suppress(OSError):
        for folder, dirs, _files in os.walk(path):
            for d in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(folder, d), 0o700)
    shutil.rmtree(path, ignore_errors=True)


def sweep(root: Path) -> None:
    """Remove what processes that are gone left half made (layers, runs)."""
    for what in ("tmp", "runs"):
        folder = root / what
        for name in os.listdir(folder) if folder.is_dir() else []:
            pid = name.split("-", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                remove(folder / name)


@contextlib.contextmanager
def pinned(layer: Path) -> Iterator[None]:
    """The layer is not removed while this is held (a shared lock)."""
    fd = os.open(f"{layer}{_LOCK}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.utime(fd)  # when it was last used
        yield
    finally:
        os.close(fd)


def _drop(layer: Path) -> bool:
    """Remove the layer unless it is pinned: whether it was removed."""
    lock = Path(f"{layer}{_LOCK}")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        aside = new_dir(layer.parent.parent, "tmp")
        with contextlib.suppress(FileNotFoundError):
            os.rename(layer, aside / "layer")
        remove(aside)
        lock.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _used(layer: Path) -> float:
    try:
        return os.stat(f"{layer}{_LOCK}").st_mtime
    except OSError:
        return 0.0


def layers_of(root: Path) -> list[Path]:
    """Every complete layer under a kind's folder (base and setup)."""
    return [
        p
        for what in ("base", "setup")
        if (root / what).is_dir()
        for p in sorted((root / what).iterdir())
        if p.is_dir()
    ]


def evict(root: Path, *, keep: int = KEEP_BASES) -> None:
    """The least recently used unpinned base layers beyond `keep`, removed."""
    folder = root / "base"
    bases = (
        sorted((p for p in folder.iterdir() if p.is_dir()), key=_used, reverse=True)
        if folder.is_dir()
        else []
    )
    for layer in bases[keep:]:
        _drop(layer)
    deltas = root / "delta"
    found = (
        sorted((p for p in deltas.iterdir() if p.is_dir()), key=_used, reverse=True)
        if deltas.is_dir()
        else []
    )
    for n, layer in enumerate(found):
        if n >= KEEP_DELTAS or not (folder / layer.name.split("-", 1)[0]).is_dir():
            _drop(layer)  # beyond the limit, or its base layer is gone


def latest_base(root: Path) -> Path | None:
    """The most recently used base layer (None: none)."""
    folder = root / "base"
    bases = [p for p in folder.iterdir() if (p / "tree").is_dir()] if folder.is_dir() else []
    return max(bases, key=_used, default=None)


def base_layer(repo: Repository, root: Path, commit: str, tree: str) -> Path:
    """The base layer of `tree` (a checkout of `commit`, forge's git dir beside it),
    made now unless it is there."""
    final = root / "base" / tree
    if (final / "tree").is_dir():
        return final
    tmp = new_dir(root, "tmp")
    try:
        worktrees.add(repo, tmp / "tree", commit, what="base layer")
        _settle(repo, tmp / "tree")
        final.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # made meanwhile by another verification
            os.rename(tmp, final)
    finally:
        remove(tmp)
    return final


def _settle(repo: Repository, tree: Path) -> None:
    """Make the base layer's index trusted as it is: its files' times set back
    (nothing writes them again) and the index refreshed after them, so no entry is
    racily clean and git, in every view of the layer, reads no file's contents to
    see it unchanged."""
    back = time.time_ns() - _RACY_NS
    for folder, dirs, files in os.walk(tree):
        if folder == str(tree):
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            with contextlib.suppress(OSError):
                os.utime(os.path.join(folder, name), ns=(back, back), follow_symlinks=False)
    own = Contained(repo, tree)
    own.run("update-index", "-q", "--refresh", check=False)
    own.owe()  # the view's own `.git/index` is the refreshed one
    own.settle()


_RACY_NS = 2_000_000_000  # how far back a base layer's file times are set


def seal(made: Path, final: Path) -> Path:
    """Put a layer made at `made` in place at `final` (another's, made meanwhile,
    wins); the layer to use."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.rename(made, final)
    remove(made)
    return final


def empty(repo: Repository) -> list[str]:
    """`forge clean --pool`: every unpinned layer removed (and layers of another
    kind); what was done."""
    notes = []
    top = store_dir(repo)
    for root in sorted(top.iterdir()) if top.is_dir() else []:
        sweep(root)
        for layer in layers_of(root):
            if _drop(layer):
                notes.append(f"removed layer {layer}")
            else:
                notes.append(f"kept layer {layer}: a verification is using it")
    return notes
