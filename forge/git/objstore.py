"""The user's object store as part of the fingerprint: every existing object file
(loose objects, packs and their indexes) by its stat data, so that one rewritten or
removed during a run is named, not "not touched".

Stat data, not content: 10k loose objects and 50 packs cost a few milliseconds to
list, where hashing them would cost seconds. git itself changes one thing about an
object file that is no change: when it writes an object it already has, it sets the
file's modification time (a "freshen", for gc's grace period). So a file whose
size and inode are the same and whose mtime moved is looked at once more: a loose
object that still hashes to its name, or a pack whose content still hashes to the
trailer it had at the start, is the same object file. Anything else that moved or
vanished is named.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from pathlib import Path

from forge.base import proc

_HEX = frozenset("0123456789abcdef")
_PACK_SUFFIXES = (".pack", ".idx")
_LIMIT = 4  # objects named per kind
CHANGED = "object store changed"  # how the fingerprint's line starts
REPACKED = "object store repacked (git gc or git repack)"  # no object lost: no change


# (size, mtime_ns, inode, a pack's trailing checksum or ""): a plain tuple, as
# 10k of them are made in a few milliseconds.
Entry = tuple[int, int, int, str]


def fingerprint(objects: Path) -> dict[str, Entry]:
    """Object file (relative to `objects`: `ab/cdef...`, `pack/pack-X.pack`) -> stat."""
    found: dict[str, Entry] = {}
    try:
        top = os.listdir(objects)
    except OSError:
        return found
    root = str(objects)
    for name in top:
        if len(name) == 2 and name[0] in _HEX and name[1] in _HEX:
            _loose(f"{root}/{name}/", name, found)
        elif name == "pack":
            _packs(f"{root}/pack/", found)
    return found


def _loose(folder: str, prefix: str, found: dict[str, Entry]) -> None:
    lstat = os.lstat
    try:
        names = os.listdir(folder)
    except OSError:
        return
    prefix += "/"
    for name in names:
        if len(name) not in (38, 62):  # git's temp files (tmp_obj_*) come and go
            continue
        try:
            st = lstat(folder + name)
        except OSError:
            continue
        found[prefix + name] = (st.st_size, st.st_mtime_ns, st.st_ino, "")


def _packs(folder: str, found: dict[str, Entry]) -> None:
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith("pack-") and name.endswith(_PACK_SUFFIXES):
            with contextlib.suppress(OSError):
                st = os.lstat(folder + name)
                tail = _trailer(folder + name, st.st_size) if name.endswith(".pack") else ""
                found[f"pack/{name}"] = (st.st_size, st.st_mtime_ns, st.st_ino, tail)


def _trailer(path: str, size: int, width: int = 20) -> str:
    """The checksum a pack ends with (sha1; a sha256 repository's packs are told by
    their name's length)."""
    name = os.path.basename(path)
    if len(name) == len("pack-.pack") + 64:
        width = 32
    with open(path, "rb") as fh:
        fh.seek(max(0, size - width))
        return fh.read(width).hex()


def changes(objects: Path, before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    """The object files of `before` that were rewritten or removed by `after`, as one
    line ([] when none). New object files are no change: git adds them all the time."""
    rewritten: list[str] = []
    removed: list[str] = []
    for name, was in before.items():
        now = after.get(name)
        if now is None:
            removed.append(name)
        elif now != was and not _freshened(objects / name, was, now):
            rewritten.append(name)
    if not rewritten and not removed:
        return []
    if not rewritten and _moved(objects, removed):
        return [f"{REPACKED}: {_count(removed)} gone, every object still there"]
    parts = []
    if rewritten:
        parts.append(f"{_count(rewritten)} rewritten ({_names(rewritten)})")
    if removed:
        parts.append(f"{_count(removed)} removed ({_names(removed)})")
    return [f"{CHANGED}: " + ", ".join(parts)]


def _moved(objects: Path, removed: list[str]) -> bool:
    """The removed object files' objects are all still in the store (`git gc`, `git
    repack` by the user): each removed loose object is there (in a pack now), and
    when a pack went, every object a ref reaches is there (`fsck --connectivity-only`:
    a pack's own list went with it)."""
    git = ["git", f"--git-dir={objects.parent}", "-c", "core.hooksPath=/dev/null"]
    env = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_CONFIG_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0"}
    loose = [n.replace("/", "") for n in removed if not n.startswith("pack/")]
    if loose:
        cp = proc.run(
            [*git, "cat-file", "--batch-check=%(objectname)"],
            cwd=objects.parent,
            env=env,
            input="".join(f"{oid}\n" for oid in loose),
            check=False,
        )
        if cp.returncode != 0 or "missing" in cp.stdout:
            return False
    if len(loose) < len(removed):
        cp = proc.run(
            [*git, "fsck", "--connectivity-only", "--no-dangling", "--no-progress"],
            cwd=objects.parent,
            env=env,
            check=False,
        )
        return cp.returncode == 0
    return True


def _freshened(path: Path, was: Entry, now: Entry) -> bool:
    """Only the mtime moved and the content is still the object it was."""
    if was[0] != now[0] or was[2] != now[2]:  # another size or another file
        return False
    name = path.name
    try:
        if name.endswith(".pack"):
            trailer = was[3]
            return bool(trailer) and _pack_sum(path, len(trailer) // 2) == trailer
        if name.endswith(".idx"):
            return False  # git never freshens an index
        return _loose_sum(path) == path.parent.name + name
    except (OSError, zlib.error):
        return False


def _loose_sum(path: Path) -> str:
    data = zlib.decompress(path.read_bytes())
    algo = hashlib.sha256 if len(path.name) == 62 else hashlib.sha1
    return algo(data).hexdigest()


def _pack_sum(path: Path, width: int) -> str:
    algo = hashlib.sha256() if width == 32 else hashlib.sha1()
    size = path.stat().st_size
    left = size - width
    with path.open("rb") as fh:
        while left > 0:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                break
            algo.update(chunk)
            left -= len(chunk)
    return algo.hexdigest()


def _count(names: list[str]) -> str:
    loose = sum(1 for n in names if not n.startswith("pack/"))
    files = len(names) - loose
    out = []
    if loose:
        out.append(f"{loose} object" + ("s" if loose != 1 else ""))
    if files:
        out.append(f"{files} pack file" + ("s" if files != 1 else ""))
    return " and ".join(out)


def _names(names: list[str]) -> str:
    shown = [_short(n) for n in sorted(names)[:_LIMIT]]
    more = f" and {len(names) - _LIMIT} more" if len(names) > _LIMIT else ""
    return ", ".join(shown) + more


def _short(name: str) -> str:
    if name.startswith("pack/"):
        return name.removeprefix("pack/")
    return name.replace("/", "")[:12] + "..."
