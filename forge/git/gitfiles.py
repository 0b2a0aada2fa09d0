"""The user's git files that change what git runs or answers, kept as they were when
a run started so that what a task changed there is put back, not only named: the
config, hooks, alternates (an object directory that goes with a task's slot breaks
every git command after), grafts and `shallow` (history cut short), attributes,
excludes, and the replace refs (`git replace` swaps one commit for another).

The bytes are kept in memory (these files are small); a file a task made a link
is replaced by the file it was, never written through.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from pathlib import Path

from forge.frozen import frozen
from forge.git.repo import Repository

# Relative to the user's git dir: files whose content changes what git runs or sees.
ANSWERS = (
    "config",
    "objects/info/alternates",
    "objects/info/http-alternates",
    "info/grafts",
    "shallow",
    "info/attributes",
    "info/exclude",
)
REPLACE = "refs/replace"
CHANGED = "git files changed"  # how the fingerprint's line starts (forge/git/snapshot.py)
PUT_BACK = "git files put back as they were"
_LOCK = threading.Lock()  # attempts end side by side: one repair at a time


@frozen
class File:
    data: bytes
    mode: int
    link: str | None = None  # a symbolic link: where it points (its data is empty)
    folder: bool = False  # a folder (a hook's): only its being there is compared


@frozen
class Kept:
    """What the user's git files held when the run started (None: absent)."""

    files: dict[str, File | None]
    replaced: dict[str, str]  # refs/replace/<oid> -> the oid it names


def names(common: Path) -> list[str]:
    """The git files looked at: `ANSWERS` and each hook."""
    try:
        hooks = sorted(os.listdir(common / "hooks"))
    except OSError:
        hooks = []
    return [*ANSWERS, *(f"hooks/{name}" for name in hooks)]


def read(path: Path) -> File | None:
    """A file's bytes and mode, a link's target, or a folder; None when absent."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return File(b"", 0, link=os.readlink(path))
        if stat.S_ISDIR(st.st_mode):
            return File(b"", 0, folder=True)
        return File(path.read_bytes(), st.st_mode & 0o7777)
    except OSError:
        return None


def keep(repo: Repository) -> Kept:
    common = repo.common_dir
    files = {name: read(common / name) for name in names(common)}
    return Kept(files, _replace_refs(repo))


def repair(repo: Repository, kept: Kept) -> list[str]:
    """Put back each git file and replace ref that differs from `kept`; what was put
    back (`[]`: nothing had changed)."""
    with _LOCK:
        common = repo.common_dir
        undone = []
        for name in sorted(set(names(common)) | set(kept.files)):
            was = kept.files.get(name)
            if read(common / name) != was:
                _put_back(common / name, was)
                undone.append(name)
        now = _replace_refs(repo)
        for ref in sorted(set(now) | set(kept.replaced)):
            old, new = kept.replaced.get(ref), now.get(ref)
            if old == new:
                continue
            if old is None:
                repo.try_git("update-ref", "-d", ref, new or "")
            else:
                repo.update_ref(ref, old, new, message="forge: put back as it was")
            undone.append(ref)
        return undone


def _put_back(path: Path, was: File | None) -> None:
    if was is not None and was.folder:
        return  # a folder's content is not kept: named, left as it is
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    if was is None:
        if os.path.lexists(path):
            os.unlink(path)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.forge-tmp")
    tmp.unlink(missing_ok=True)
    if was.link is not None:
        os.symlink(was.link, tmp)
        os.replace(tmp, path)
        return
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, was.mode)
    with os.fdopen(fd, "wb") as out:
        out.write(was.data)
    os.chmod(tmp, was.mode)
    os.replace(tmp, path)  # over a link, the link: never written through


def _replace_refs(repo: Repository) -> dict[str, str]:
    out = repo.try_git("for-each-ref", "--format=%(objectname) %(refname)", REPLACE).stdout
    found = {}
    for line in out.splitlines():
        oid, _, ref = line.partition(" ")
        found[ref] = oid
    return found
