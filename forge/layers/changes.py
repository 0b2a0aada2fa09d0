"""What a run changed in its checkout, read from its upper layer: O(what it wrote),
never a scan of the tree.

The upper layer holds every file the run wrote (copied up whole), a whiteout for
each path it deleted (a character device 0/0) and, for a folder it removed and made
again, the folder marked opaque (an `overlay.opaque` extended attribute): what lies
below it in the lower layers is hidden. A path of the base layer (a checkout of the
tree: it holds only tracked files) that was rewritten with other contents, deleted
or hidden is a change; so is a new file git does not ignore (asked of `git
check-ignore`, with the base layer's ignore rules), and a HEAD that moved. forge's
own files of the run (`.git` of the view, where a run's git commands write) are
not changes: they go with the upper layer.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import os
import stat
import sys
from pathlib import Path

from forge.base import proc
from forge.git.contained import HARDENED, NO_HOOKS

_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")


def _whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _opaque(path: str) -> bool:
    for name in _OPAQUE:
        with contextlib.suppress(OSError):
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
    return False


def _tracked_under(base: Path, rel: str) -> list[str]:
    """The base layer's files at or under `rel` (what hiding `rel` deletes)."""
    top = base / rel
    if not os.path.lexists(top):
        return []
    if not top.is_dir() or top.is_symlink():
        return [rel]
    out = []
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        out += [os.path.relpath(os.path.join(folder, n), base) for n in sorted(files)]
        out += [
            os.path.relpath(os.path.join(folder, n), base)
            for n in dirs
            if os.path.islink(os.path.join(folder, n))
        ]
    return out


def _same(upper: str, lower: Path) -> bool:
    """The file the run left is the base layer's (kind, executable bit, contents)."""
    try:
        a, b = os.lstat(upper), os.lstat(lower)
    except OSError:
        return False
    if stat.S_IFMT(a.st_mode) != stat.S_IFMT(b.st_mode):
        return False
    if stat.S_ISLNK(a.st_mode):
        return os.readlink(upper) == os.readlink(lower)
    if (a.st_mode & 0o111 != 0) != (b.st_mode & 0o111 != 0):
        return False
    return a.st_size == b.st_size and filecmp.cmp(upper, lower, shallow=False)


def _entry(upper: str, rel: str, base: Path, found: tuple[list[str], list[str]]) -> bool:
    """Note what the upper layer's `rel` changes into `found` (changed, new): whether
    it is a folder to look into."""
    changed, new = found
    st = os.lstat(upper)
    lower = base / rel
    below = os.path.lexists(lower)
    folder_below = below and lower.is_dir() and not lower.is_symlink()
    if _whiteout(st):
        changed += _tracked_under(base, rel)
    elif stat.S_ISDIR(st.st_mode):
        if below and not folder_below:
            changed.append(rel)  # a folder where a tracked file was
        return True
    elif folder_below:
        changed += _tracked_under(base, rel)  # a file over a tracked folder
    elif below:
        if not _same(upper, lower):
            changed.append(rel)
    else:
        new.append(rel)
    return False


def walk(upper: Path, base: Path) -> tuple[list[str], list[str]]:
    """(tracked paths changed, new paths) the upper layer shows against the base
    layer, each relative to the tree; the view's `.git` left out."""
    found: tuple[list[str], list[str]] = ([], [])
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        folder = os.path.join(upper, rel_dir)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        if rel_dir and _opaque(folder):  # what was below it is gone
            below = base / rel_dir
            for name in sorted(os.listdir(below)) if below.is_dir() else []:
                if name not in names:
                    found[0].extend(_tracked_under(base, os.path.join(rel_dir, name)))
        for name in names:
            rel = os.path.join(rel_dir, name)
            if rel != ".git" and _entry(os.path.join(folder, name), rel, base, found):
                stack.append(rel)
    return sorted(set(found[0])), sorted(found[1])


def not_ignored(base: Path, git_dir: Path, paths: list[str]) -> list[str]:
    """The paths git does not ignore, by the base layer's rules (what lies in a
    nested `.git`, which git never shows, left out)."""
    paths = [p for p in paths if ".git" not in p.split("/")]
    if not paths:
        return []
    argv = ["git", f"--git-dir={git_dir}", f"--work-tree={base}", *NO_HOOKS]
    cp = proc.run(
        [*argv, "check-ignore", "-z", "--stdin", "--no-index"],
        cwd=base,
        env={**HARDENED, "GIT_CEILING_DIRECTORIES": str(base.parent)},
        input="".join(f"{p}\0" for p in paths),
        check=False,
    )
    ignored = set(cp.stdout.split("\0"))
    return [p for p in paths if p not in ignored]


def head_of(git_dir: Path, upper_git: Path) -> str:
    """The view's HEAD as the run left it (its upper `.git` over the base's), as a
    commit when it can be read from files, else what HEAD says."""

    def read(rel: str) -> str | None:
        for where in (upper_git, git_dir):
            path = where / rel
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if _whiteout(st):
                    return None
                return path.read_text(errors="replace").strip()
        return None

    text = read("HEAD") or ""
    if text.startswith("ref: "):
        ref = text[5:].strip()
        return read(ref) or text
    return text


def of_run(upper: Path, base: Path, git_dir: Path) -> list[str]:
    """The tracked paths a run changed and the new paths git does not ignore."""
    changed, new = walk(upper, base)
    return sorted({*changed, *not_ignored(base, git_dir, new)})


if __name__ == "__main__":  # in a namespace where the lower layers are mounted here
    print(json.dumps(of_run(Path(sys.argv[1]), Path.cwd(), Path(sys.argv[2]))))
