"""The user's git files that change what git runs or answers, kept as they were when
a run started so that what a task changed there is put back, not only named: the
config, hooks, alternates (an object directory that goes with a task's slot breaks
every git command after), grafts and `shallow` (history cut short), attributes,
excludes, and the replace refs (`git replace` swaps one commit for another).

The bytes are kept in memory (these files are small) and in the plan's folder
(`gitfiles.json`, written before the run's first task starts): a run killed before
its end leaves that file, and the next run of the plan puts back from it, not from
what the killed run's tasks left. A file a task made a link is replaced by the file
it was, never written through.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
import threading
from pathlib import Path

from forge.base.files import read_json_or, write_json
from forge.errors import StateError
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
KEPT_FILE = "gitfiles.json"
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


def keep_for_run(repo: Repository, folder: Path) -> Kept:
    """The run's baseline: the one a run that did not end left in `folder` (its
    start's, before any of its tasks), else the files as they are now, written
    there before anything runs."""
    path = folder / KEPT_FILE
    data = read_json_or(path, None, what="kept git files")
    if data is not None:
        try:
            return _decoded(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"{path}: not forge's kept git files ({exc}): remove it") from None
    kept = keep(repo)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(path, _encoded(kept))
    return kept


def forget_run(folder: Path) -> None:
    """The run ended with its git files as they were: its baseline is not needed."""
    (folder / KEPT_FILE).unlink(missing_ok=True)


def _encoded(kept: Kept) -> dict[str, object]:
    files: dict[str, object] = {}
    for name, f in kept.files.items():
        files[name] = (
            None
            if f is None
            else {
                "data": base64.b64encode(f.data).decode("ascii"),
                "mode": f.mode,
                "link": f.link,
                "folder": f.folder,
            }
        )
    return {"files": files, "replaced": dict(kept.replaced)}


def _decoded(data: dict[str, object]) -> Kept:
    files: dict[str, File | None] = {}
    raw = data["files"]
    if not isinstance(raw, dict):
        raise TypeError("files is not a table")
    for name, f in raw.items():
        if f is None:
            files[str(name)] = None
            continue
        link = f["link"]
        files[str(name)] = File(
            base64.b64decode(str(f["data"])),
            int(f["mode"]),
            link=None if link is None else str(link),
            folder=bool(f["folder"]),
        )
    replaced = data["replaced"]
    if not isinstance(replaced, dict):
        raise TypeError("replaced is not a table")
    return Kept(files, {str(k): str(v) for k, v in replaced.items()})


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
