"""A delta layer: a later tree as the base layer of an earlier one plus the
difference between the two, so that a verification of a new tree costs O(its
changes), not a checkout of every file.

The delta is made once per (base layer, tree): in a mount namespace of its own,
an overlay over the base layer takes `git checkout` of the new commit (git reads
the base layer's index, whose files it sees unchanged, and writes only what
differs); its upper layer (the files that differ, a whiteout for each one gone,
the view's new `.git/index`) becomes a read-only layer between the base layer and
the runs. Past `MAX_PATHS` changed paths a base layer of its own is made instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from forge.git import taskgit
from forge.git.contained import HARDENED, NO_HOOKS
from forge.git.repo import Repository
from forge.layers import store
from forge.layers.mode import Mode, enter_argv, overlay_options

MAX_PATHS = 2000  # paths changed since the base layer's tree: past it, a new base layer
_CHECKOUT = (
    'git --git-dir="$G" --work-tree=. "$@" checkout --quiet --force --no-recurse-submodules '
    '--detach "$C" && cp "$G/index" .git/index'
)


def _changed(repo: Repository, old: str, new: str) -> int | None:
    cp = repo.try_git("diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new)
    return None if cp.returncode != 0 else len([p for p in cp.stdout.split("\0") if p])


def layer(repo: Repository, root: Path, mode: Mode, base: Path, commit: str) -> Path | None:
    """The delta layer that makes the base layer `base` the tree of `commit` (made
    now unless there); None: the difference is too large, or cannot be made."""
    tree = repo.tree_of(commit)
    final = root / "delta" / f"{base.name}-{tree}"
    if (final / "layer").is_dir():
        return final
    old = taskgit.head(base / "tree.git")
    count = None if old is None else _changed(repo, old, commit)
    if count is None or count > MAX_PATHS:
        return None
    tmp = store.new_dir(root, "tmp")
    try:
        git_dir, upper, work, mnt = (tmp / n for n in ("git", "layer", "work", "mnt"))
        shutil.copytree(base / "tree.git", git_dir, symlinks=True)
        for folder in (upper, work, mnt):
            folder.mkdir()
        opts = overlay_options([base / "tree"], upper, work, mode.user_ns)
        argv = [*enter_argv(mode.user_ns, opts, mnt), "sh", "-c", _CHECKOUT, "delta", *NO_HOOKS]
        env = {
            **HARDENED,
            "G": str(git_dir),
            "C": commit,
            "GIT_OBJECT_DIRECTORY": str(repo.common_dir / "objects"),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        cp = subprocess.run(
            argv, cwd=mnt, env=env, capture_output=True, stdin=subprocess.DEVNULL, check=False
        )
        if cp.returncode != 0:
            return None
        for folder in (git_dir, work, mnt):
            store.remove(folder)
        return store.seal(tmp, final)
    except OSError:  # the base layer removed meanwhile: a base layer of its own
        return None
    finally:
        store.remove(tmp)
