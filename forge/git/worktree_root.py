"""Where a repository's worktrees live, and the claim that keeps two repositories
of one name apart under a root they share.

By default the folder is `<parent>/.forge-worktrees/<name>`, beside the repository:
two repositories there have two parents or two names. Under a root given with
FORGE_WORKTREES or --worktree-root many repositories meet, and two of one folder
name (`/a/repo`, `/b/repo`) would share `<root>/repo`: their plans' slots, and their
verification pool, whose locks are per repository, so that one repository's
verification runs in the other's checkout. So a folder under a given root is
claimed for one repository by a marker beside it, `<root>/.<folder>.forge-owner`,
naming the repository's git common dir and made by an exclusive create (of two
repositories racing for it, one wins). The first repository keeps `<root>/<name>`
(where the user looks); another of that name gets `<root>/<name>-<hash of its
common dir>`, claimed the same way. The marker lies beside the folder, not in it:
`forge clean` removes the folder once it is empty, and the claim outlives it.

A `<root>/<name>` an older forge made has no marker: whose it is is read from the
checkouts in it (forge's git dir beside each slot and verification checkout borrows
its repository's objects, `objects/info/alternates`; a linked worktree's `.git` file
names its repository's), and the folder is claimed for that repository then. One
that cannot be told (nothing in it says, or two repositories are in it already) is
used as before, unclaimed, rather than leave anyone's work where they no longer look.

The common case costs one read of the marker (and the Repository keeps the answer).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from pathlib import Path

from forge.base.settings import Settings

MARKER_SUFFIX = ".forge-owner"
MERGE_CACHES = ".merge"  # forge/git/mergedir.py: git dirs made again when missing, nobody's work
_HASH = 8  # hex digits of the common dir's hash in a second repository's folder name
_LOOKED_AT = 64  # checkouts read to tell whose an unmarked folder is, at most
_WAIT = 1.0  # seconds a marker being written (no hard links here) may stay empty


def worktrees_for(settings: Settings, main_root: Path, common_dir: Path) -> Path:
    """The folder of the worktrees (slots, verification checkouts) of the repository
    whose main worktree is `main_root`: outside the user's tree, so their tools never
    walk into them, and its own even when another repository has its name."""
    folder = first_choice(settings, main_root)
    given = settings.worktree_root
    if given is None or main_root.is_relative_to(given):
        return folder  # beside the repository; or forge run in a checkout of forge's own
    owner = owner_of(folder) or _settle(folder, common_dir)
    if owner is None or _same(owner, common_dir):
        return folder
    digest = hashlib.sha256(str(common_dir).encode()).hexdigest()[:_HASH]
    own = given / f"{main_root.name}-{digest}"
    if owner_of(own) is None:
        _claim(own, common_dir)
    return own


def first_choice(settings: Settings, main_root: Path) -> Path:
    """The folder named after the repository: its own unless another repository of
    that name under the same given root claimed it first."""
    if settings.worktree_root is None:
        return main_root.parent / ".forge-worktrees" / main_root.name
    return settings.worktree_root / main_root.name


def marker(folder: Path) -> Path:
    """The file that claims `folder` for a repository."""
    return folder.with_name(f".{folder.name}{MARKER_SUFFIX}")


def owner_of(folder: Path, *, wait: float = 0.0) -> Path | None:
    """The common dir of the repository `folder` is claimed for (None: unclaimed).
    `wait`: how long an empty marker (one being written) is read again."""
    deadline = time.monotonic() + wait
    while True:
        try:
            text = marker(folder).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return None
        if text.strip():
            return Path(text.strip())
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _same(owner: Path, common_dir: Path) -> bool:
    return owner == common_dir or owner.resolve() == common_dir.resolve()


def _settle(folder: Path, common_dir: Path) -> Path | None:
    """An unclaimed folder claimed for whom it is found to be (None: cannot be told):
    no folder, or one with nothing but merge caches (anyone's, made again on
    demand), is this repository's; one with checkouts is the repository's they all
    belong to. Whoever won the claim is returned."""
    try:
        held = folder.is_dir() and any(p.name != MERGE_CACHES for p in folder.iterdir())
    except OSError:
        return None
    if held:
        found = _repositories_in(folder)
        if len(found) != 1:
            return None
        common_dir = found.pop()
    _claim(folder, common_dir)
    return owner_of(folder, wait=_WAIT)


def _claim(folder: Path, common_dir: Path) -> None:
    """The marker naming `common_dir`, made unless one is there: written whole aside,
    then linked into place (a link never replaces a file), so no reader sees half
    of it. A root forge cannot write leaves the folder unclaimed (as before)."""
    final = marker(folder)
    text = f"{common_dir.resolve()}\n"
    with contextlib.suppress(OSError):
        final.parent.mkdir(parents=True, exist_ok=True)
        aside = final.with_name(f"{final.name}.{os.getpid()}-{threading.get_ident()}")
        aside.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            os.link(aside, final)
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system: an exclusive create
            with contextlib.suppress(FileExistsError):
                fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, text.encode("utf-8", "surrogateescape"))
                finally:
                    os.close(fd)
        finally:
            aside.unlink(missing_ok=True)


def _repositories_in(folder: Path) -> set[Path]:
    """The common dirs of the repositories whose checkouts are in `folder`: a plan's
    slots (`<plan>/<slot>`) and the verification checkouts (`.verify/<key>/<lane>`)."""
    found: set[Path] = set()
    places = [p for p in _children(folder) if p.name != ".verify"]
    places += _children(folder / ".verify")
    for checkout in [c for place in places for c in _children(place)][:_LOOKED_AT]:
        common = _repository_of(checkout)
        if common is not None:
            found.add(common)
        if len(found) > 1:
            break
    return found


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def _repository_of(checkout: Path) -> Path | None:
    """The common dir `checkout` belongs to: forge's git dir of a folder (`<folder>.git`)
    borrows its objects, a linked worktree's `.git` file names its admin folder."""
    try:
        if checkout.name.endswith(".git"):
            alternates = checkout / "objects" / "info" / "alternates"
            line = alternates.read_text(encoding="utf-8", errors="surrogateescape")
            objects = Path(line.splitlines()[0].strip()) if line.strip() else None
            return objects.parent.resolve() if objects is not None else None
        dot_git = checkout / ".git"
        if dot_git.is_file() and not dot_git.is_symlink():
            text = dot_git.read_text(encoding="utf-8", errors="surrogateescape").strip()
            if text.startswith("gitdir:"):
                admin = (checkout / text.removeprefix("gitdir:").strip()).resolve()
                return admin.parent.parent  # <common dir>/worktrees/<id>
    except OSError:
        return None
    return None
