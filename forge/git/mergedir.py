"""Where forge's merges run: a bare git dir of forge's own that reads the user's
objects (`GIT_OBJECT_DIRECTORY`) and nothing else of theirs.

`git merge-tree` run in the user's repository reads attributes from their working
tree and `.git/info/attributes` (git 2.39 has no `--attr-source`): a `* merge=union`
there silently union-merged a conflict. In a bare git dir of forge's, no working tree
is read; its `info/attributes` holds the merged side's committed `.gitattributes`
(what `git merge` on a checkout of it would apply), and where git has
`--attr-source` the tree is named too. The git dir is named by the hash of the
attributes it holds, written once and never changed, so two merges at once share it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from forge.base import proc
from forge.git.contained import HARDENED, NO_HOOKS
from forge.git.repo import Repository, git_version
from forge.git.worktree_root import MERGE_CACHES


def merge_tree(repo: Repository, ours: str, theirs: str, *args: str) -> proc.Completed:
    """`git merge-tree ARGS ours theirs` seeing only the two commits and the
    `.gitattributes` committed in `ours`."""
    shown = repo.try_git("cat-file", "blob", f"{ours}:.gitattributes")
    attributes = shown.stdout if shown.returncode == 0 else ""
    git_dir = _git_dir(repo, attributes, sha256=len(ours) == 64)
    source = [f"--attr-source={ours}"] if _has_attr_source() else []
    argv = ["git", f"--git-dir={git_dir}", *source, *NO_HOOKS, "merge-tree", *args, ours, theirs]
    env = {**HARDENED, "GIT_OBJECT_DIRECTORY": str(repo.common_dir / "objects")}
    return proc.run(argv, cwd=repo.common_dir, env=env, check=False)


@cache
def _has_attr_source() -> bool:
    return git_version() >= (2, 40)


def _git_dir(repo: Repository, attributes: str, *, sha256: bool) -> Path:
    data = attributes.encode("utf-8", "surrogateescape")
    name = hashlib.sha256(data).hexdigest()[:20] + (".sha256" if sha256 else "") + ".git"
    where = repo.worktrees_root() / MERGE_CACHES / name
    if (where / "HEAD").is_file():
        return where
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".merge-", dir=where.parent))
    try:
        (tmp / "refs").mkdir()
        (tmp / "objects").mkdir()
        (tmp / "info").mkdir()
        (tmp / "HEAD").write_text("ref: refs/heads/none\n")
        fmt = "\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n"
        (tmp / "config").write_text(
            "[core]\n\tbare = true\n" + (fmt if sha256 else "\trepositoryformatversion = 0\n")
        )
        (tmp / "info" / "attributes").write_bytes(data)
        os.rename(tmp, where)
    except OSError:
        if not (where / "HEAD").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return where
