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
import os
import stat
from pathlib import Path

from forge.base import proc
from forge.git.contained import HARDENED, NO_HOOKS
from forge.layers.below import Below, opaque, whiteout


def _same(upper: str, lower: str) -> bool:
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


def _entry(upper: str, rel: str, below: Below, found: tuple[list[str], list[str]]) -> bool:
    """Note what the upper layer's `rel` changes into `found` (changed, new): whether
    it is a folder to look into."""
    changed, new = found
    st = os.lstat(upper)
    lower = below.find(rel)
    folder_below = lower is not None and os.path.isdir(lower) and not os.path.islink(lower)
    if whiteout(st):
        changed += below.files_under(rel)
    elif stat.S_ISDIR(st.st_mode):
        if lower is not None and not folder_below:
            changed.append(rel)  # a folder where a tracked file was
        return True
    elif folder_below:
        changed += below.files_under(rel)  # a file over a tracked folder
    elif lower is not None:
        if not _same(upper, lower):
            changed.append(rel)
    else:
        new.append(rel)
    return False


def walk(upper: Path, below: Below) -> tuple[list[str], list[str]]:
    """(tracked paths changed, new paths) the upper layer shows against the layers
    below it, each relative to the tree; the view's `.git` left out."""
    found: tuple[list[str], list[str]] = ([], [])
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        folder = os.path.join(upper, rel_dir)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        if rel_dir and opaque(folder):  # what was below it is gone
            for name in below.names(rel_dir):
                if name not in names:
                    found[0].extend(below.files_under(f"{rel_dir}/{name}"))
        for name in names:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if rel != ".git" and _entry(os.path.join(folder, name), rel, below, found):
                stack.append(rel)
    return sorted(set(found[0])), sorted(found[1])


def not_ignored(
    base: Path, git_dir: Path, paths: list[str], enter: tuple[str, ...] = ()
) -> list[str]:
    """The paths git does not ignore, by the rules of the tree at `base` (`enter`:
    the prefix that mounts it there; what lies in a nested `.git`, which git never
    shows, left out)."""
    paths = [p for p in paths if ".git" not in p.split("/")]
    if not paths:
        return []
    argv = [*enter, "git", f"--git-dir={git_dir}", f"--work-tree={base}", *NO_HOOKS]
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
                if whiteout(st):
                    return None
                return path.read_text(errors="replace").strip()
        return None

    text = read("HEAD") or ""
    if text.startswith("ref: "):
        ref = text[5:].strip()
        return read(ref) or text
    return text
