"""A verification checkout holds exactly the judged commit plus what the plan's
`setup` made there, before every run of a lane.

Ignored files are part of what a test suite sees: a `.pyc` an earlier verification
left (a source rewritten in the same second keeps its size and mtime, so Python
believes the stale bytecode) made a broken commit PASS. So every untracked or
ignored path is removed (what `git clean -ffdx` removes) except the paths `setup`
created, which were recorded when it ran on a clean checkout: its environment
survives, so nothing is installed again.

The index can hide a change from `git status`: a tracked file marked
`skip-worktree` or `assume-unchanged` may be rewritten and nothing shows it, and
`checkout --force`, `reset --hard` and `clean` all leave it. So the flags are
cleared, and a run that sets one (or writes `info/exclude`, `info/attributes` or
`info/sparse-checkout`, which forge never writes in its checkouts) has changed its
checkout.

Everything here takes the checkout's work tree and git dir, nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from forge.base import proc
from forge.git import taskgit
from forge.git.contained import HARDENED, NO_HOOKS

# What forge never writes in a checkout's git dir, and what would hide a change.
_HIDING = ("info/exclude", "info/attributes", "info/sparse-checkout")
_GLOB = re.compile(r"([\\*?\[])")


def _git(work_tree: Path, git_dir: Path, *args: str, input: str | None = None) -> str:
    argv = ["git", f"--git-dir={git_dir}", f"--work-tree={work_tree}", *NO_HOOKS, *args]
    env = {**HARDENED, "GIT_CEILING_DIRECTORIES": str(work_tree.parent)}
    return proc.run(argv, cwd=work_tree, env=env, input=input).stdout


def untracked(work_tree: Path, git_dir: Path, *, ignored: bool = False) -> list[str]:
    """Every untracked path, ignored ones included (`ignored`: only those); a folder
    holding nothing tracked is one entry ending in `/`."""
    only = ("--ignored", "--exclude-standard") if ignored else ()
    out = _git(work_tree, git_dir, "ls-files", "-z", "--others", "--directory", *only)
    return sorted(p for p in out.split("\0") if p)


def hidden(work_tree: Path, git_dir: Path) -> list[str]:
    """What hides a change from `git status`: flagged index entries, and the files
    in the git dir that forge never writes."""
    out: list[str] = []
    for entry in _git(work_tree, git_dir, "ls-files", "-v", "-z").split("\0"):
        tag, _, path = entry.partition(" ")
        if tag in ("S", "s"):
            out.append(f"{path} (skip-worktree)")
        if tag.islower():
            out.append(f"{path} (assume-unchanged)")
    out += [f".git/{name}" for name in _HIDING if (git_dir / name).exists()]
    return out


def unflag(work_tree: Path, git_dir: Path) -> None:
    """The index as the commit has it: no `skip-worktree` or `assume-unchanged` entry
    (a `reset --hard` afterwards rewrites what the flags hid), nothing in the git dir
    that hides a change."""
    entries = _git(work_tree, git_dir, "ls-files", "-v", "-z").split("\0")
    skipped = [e[2:] for e in entries if e[:1] in ("S", "s")]
    assumed = [e[2:] for e in entries if e[:1].islower()]
    # One flag a call: given both, `update-index` applies only the last.
    for flag, paths in (("--no-skip-worktree", skipped), ("--no-assume-unchanged", assumed)):
        if paths:
            stdin = "".join(f"{p}\0" for p in paths)
            _git(work_tree, git_dir, "update-index", flag, "-z", "--stdin", input=stdin)
    for name in _HIDING:
        with contextlib.suppress(FileNotFoundError):
            (git_dir / name).unlink()


def scrub(work_tree: Path, git_dir: Path, *, keep: Sequence[str]) -> None:
    """Remove every untracked and ignored path but those in `keep` (setup's
    products, as `untracked` listed them) and what lies under them."""
    excludes = [arg for path in keep for arg in ("-e", "/" + _pattern(path))]
    _git(work_tree, git_dir, "clean", "-ffdxq", *excludes)
    _nested_git(work_tree, keep)


def _nested_git(work_tree: Path, keep: Sequence[str]) -> None:
    """Remove every `.git` below the top (which `git status` never shows, and `git
    clean` never removes from a tracked folder): a run's hidden repository."""
    kept = {os.path.join(work_tree, p.rstrip("/")) for p in keep}
    for folder, dirs, files in os.walk(work_tree):
        if folder == str(work_tree):
            dirs[:] = [d for d in dirs if d != ".git"]
            continue
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in kept]
        if ".git" in dirs or ".git" in files:
            dirs[:] = [d for d in dirs if d != ".git"]
            taskgit.remove(Path(folder) / ".git")


def _pattern(path: str) -> str:
    """`path` as a gitignore pattern that matches it and nothing else."""
    text = _GLOB.sub(r"\\\1", path)
    stripped = text.rstrip(" ")
    return stripped + "\\ " * (len(text) - len(stripped))


# Files whose content decides what Python runs at start (or a command's entry
# script): hashed whatever their size. Every other file of setup's products is
# known by its path, size, mode and modification time, and hashed when small;
# bytecode in `__pycache__` (which every import may write) is left out.
_RUN_AT_START = re.compile(r"(\.pth|^sitecustomize\.py|^usercustomize\.py)$")
_SMALL = 64 * 1024


def products_fingerprint(work_tree: Path, paths: Sequence[str]) -> str:
    """One hash over what setup made (`paths`, as `untracked` lists them)."""
    digest = hashlib.sha256()
    for rel, entry in products_entries(work_tree, paths).items():
        digest.update(b"%s\0%s\0" % (rel.encode("utf-8", "surrogateescape"), entry.encode()))
    return digest.hexdigest()


def products_entries(
    work_tree: Path, paths: Sequence[str], *, by_ctime: bool = False
) -> dict[str, str]:
    """What setup made (`paths`, as `untracked` lists them), file by file: each
    path (relative to `work_tree`) with its kind, size, mode, time and, for what is
    small or runs at start, the hash of its content. `by_ctime`: files that stay
    where they are (a slot's), known by their inode and change time, which no
    write, `chmod` or `touch` leaves as it was: only what runs at start is hashed."""
    out: dict[str, str] = {}
    root = len(str(work_tree)) + 1
    for top in sorted(paths):
        for path in _walk(os.path.join(work_tree, top.rstrip("/"))):
            folder, name = os.path.split(path)
            parent = os.path.basename(folder)
            if parent == "__pycache__" and name.endswith(".pyc"):
                continue  # Python's own caches, written by every import: not a change
            try:
                st = os.lstat(path)
            except OSError:
                continue
            rel = path[root:]
            if stat.S_ISDIR(st.st_mode):  # (its mtime moves with any cache written in it)
                out[rel] = f"{st.st_mode:o}"
                continue
            entry = f"{st.st_size} {st.st_mode:o} {st.st_mtime_ns}"
            if by_ctime:
                entry += f" {st.st_ino} {st.st_ctime_ns}"
            if stat.S_ISLNK(st.st_mode):
                entry += " " + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
            elif stat.S_ISREG(st.st_mode) and (
                (st.st_size <= _SMALL and not by_ctime)
                or _RUN_AT_START.search(name)
                or parent in ("bin", "Scripts")
            ):
                with contextlib.suppress(OSError), open(path, "rb") as f:
                    entry += " " + hashlib.sha256(f.read()).hexdigest()
            out[rel] = entry
    return out


def bytecode(work_tree: Path, paths: Sequence[str]) -> dict[str, str]:
    """The bytecode files (`__pycache__/*.pyc`) among setup's products, each known by
    its inode, size and change time (which no write leaves as it was)."""
    out: dict[str, str] = {}
    root = len(str(work_tree)) + 1
    for top in sorted(paths):
        for path in _walk(os.path.join(work_tree, top.rstrip("/"))):
            folder, name = os.path.split(path)
            if os.path.basename(folder) == "__pycache__" and name.endswith(".pyc"):
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    out[path[root:]] = f"{st.st_ino} {st.st_size} {st.st_ctime_ns}"
    return out


def drop_bytecode(work_tree: Path, paths: Sequence[str], kept: dict[str, str]) -> None:
    """Remove the bytecode among setup's products that setup did not leave as it is
    (`kept`): a run may have planted a `.pyc` Python never checks against its source
    (an unchecked hash), and Python writes what it needs anew."""
    for rel, entry in bytecode(work_tree, paths).items():
        if kept.get(rel) != entry:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(work_tree, rel))


def _walk(top: str) -> list[str]:
    if not os.path.isdir(top) or os.path.islink(top):
        return [top]
    found = [top]
    for folder, dirs, files in os.walk(top):
        dirs.sort()
        found += [os.path.join(folder, n) for n in dirs if os.path.islink(os.path.join(folder, n))]
        found += [os.path.join(folder, n) for n in sorted(files)]
    return found
