"""The one door to git.

Hot paths use git plumbing through `proc.run` (a git call costs ~2 ms; importing
GitPython ~75 ms), so nothing here imports GitPython at module level; it is loaded
only where its object model earns its cost. Refs are updated with the expected old
value, so a concurrent move is detected rather than overwritten.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import field
from functools import cached_property
from pathlib import Path

from forge.base import proc
from forge.base.files import StateDir
from forge.base.settings import Settings
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git import known, worktree_root

# forge's own git in the user's repository reads objects as they are: a replace ref
# (`refs/replace/`, which a task may write outside the sandbox) would make a commit
# or a file read as another, and `forge accept` write what was never verified.
OWN = {"GIT_NO_REPLACE_OBJECTS": "1"}
MIN_GIT = (2, 38)  # `git merge-tree --write-tree` arrived in 2.38
ZERO = "0" * 40
SHORT_SHA = 12  # enough to be unique in any repository people read


def short_sha(sha: str | None) -> str:
    """A commit or tree id as forge prints it."""
    return (sha or "")[:SHORT_SHA]


def git_version() -> tuple[int, int]:
    out = proc.run(["git", "--version"], cwd=Path("/")).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    if not m:
        raise ForgeError(f"cannot tell git's version from {out.strip()!r}")
    return int(m.group(1)), int(m.group(2))


def check_git_version(version: tuple[int, int] | None = None) -> None:
    have = version or git_version()
    if have < MIN_GIT:
        raise ForgeError(
            f"forge needs git {MIN_GIT[0]}.{MIN_GIT[1]} or newer "
            f"(for merge-tree --write-tree); this git is {have[0]}.{have[1]}"
        )


@frozen
class Repository:
    """A repository as forge sees it, from any of its worktrees."""

    root: Path  # top of the worktree forge was called from
    common_dir: Path  # shared by every worktree: forge's state lives here
    main_root: Path  # the main worktree
    settings: Settings = field(default_factory=Settings)  # what this process runs with

    def git(
        self,
        *args: str,
        cwd: Path | None = None,
        input: str | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> str:
        return proc.run(
            ["git", *args],
            cwd=cwd or self.root,
            input=input,
            check=check,
            env={**OWN, **(env or {})},
        ).stdout

    def try_git(self, *args: str, cwd: Path | None = None) -> proc.Completed:
        return proc.run(["git", *args], cwd=cwd or self.root, check=False, env=OWN)

    @cached_property
    def state(self) -> StateDir:
        return StateDir.for_common_dir(self.common_dir)

    @property
    def name(self) -> str:
        return self.main_root.name

    @cached_property
    def _worktrees(self) -> Path:
        """Found once: a claim under a shared root is read (or made) at the first call.
        A root inside the user's working tree is refused before anything is written
        there: the user's `git add -A` would pick slots up, and a slot's git calls
        could climb into the user's repo."""
        first = worktree_root.first_choice(self.settings, self.main_root)
        for tree in {self.main_root, self.root}:
            if first == tree or tree in first.parents:
                raise ForgeError(
                    f"the worktree root {first.parent} is inside your working tree {tree}; "
                    "choose a folder outside it (--worktree-root or FORGE_WORKTREES)"
                )
        return worktree_root.worktrees_for(self.settings, self.main_root, self.common_dir)

    def worktrees_root(self) -> Path:
        """Where forge puts this repository's worktrees and verification checkouts:
        its own folder, even when another repository under the same root has its
        name (forge/git/worktree_root.py)."""
        return self._worktrees

    def rev_parse(self, rev: str) -> str:
        """The commit `rev` names, or a ForgeError saying it names none."""
        cp = self.try_git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
        )
        if cp.returncode != 0:
            raise ForgeError(
                f"unknown revision '{rev}': no commit by that name in {self.main_root}"
            )
        return cp.stdout.strip()

    def ref_value(self, ref: str) -> str | None:
        """What `ref` points at (None: absent). A branch or a ref of forge's stored as
        a loose file is read as that file (git writes it whole, by a rename), which
        costs a read instead of a git process; any other ref is git's to resolve."""
        loose = _loose_ref(self.common_dir, ref)
        if loose is not None:
            return loose
        if _surely_absent(self.common_dir, ref):
            return None  # a task's branch before its first attempt: no git process
        cp = self.try_git("rev-parse", "--verify", "--quiet", ref)
        return cp.stdout.strip() if cp.returncode == 0 else None

    def current_branch(self) -> str | None:
        cp = self.try_git("symbolic-ref", "--quiet", "--short", "HEAD")
        return cp.stdout.strip() if cp.returncode == 0 else None

    def tree_of(self, rev: str) -> str:
        tree = known.tree(rev)
        if tree is None:
            tree = self.git("rev-parse", f"{rev}^{{tree}}").strip()
            known.remember(rev, tree=tree)
        return tree

    def first_parent_commits(
        self, since: str, until: str, *, limit: int = 500
    ) -> list[tuple[str, str]]:
        """(commit, message) of the commits `until` has over `since`, newest first,
        following first parents (on an integration branch: one merge a landed task)."""
        out = self.git(
            "log",
            "-z",
            "--first-parent",
            f"--max-count={limit}",
            "--format=%H%n%B",
            f"{since}..{until}",
        )
        found = [entry.partition("\n") for entry in out.split("\0") if entry.strip()]
        return [(sha.strip(), message) for sha, _, message in found]

    def update_ref(self, ref: str, new: str, old: str | None, *, message: str) -> None:
        """Move `ref` to `new` only if it still points at `old` (None: must not exist)."""
        cp = self.try_git("update-ref", "-m", message, ref, new, old or ZERO)
        if cp.returncode != 0:
            raise ForgeError(
                f"{ref} moved while forge was updating it (expected {short_sha(old) or 'absent'}): "
                f"{proc.tail(cp.stderr, 1)}"
            )


# Refs shared by every worktree whose loose file `ref_value` may read itself.
_SHARED_REF = re.compile(r"^refs/(?:heads|forge)/[A-Za-z0-9._/-]+$")
_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def _loose_ref(common_dir: Path, ref: str) -> str | None:
    """The object id in the loose file of `ref` (None: no such plain file, a
    symbolic ref, anything else: git is asked)."""
    if not _SHARED_REF.match(ref) or ".." in ref or "//" in ref or ref.endswith((".lock", "/")):
        return None
    try:
        fd = os.open(common_dir / ref, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 200).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return text if _OID.match(text) else None


def _surely_absent(common_dir: Path, ref: str) -> bool:
    """`ref` (a branch or a ref of forge's) has no loose file and is not in
    `packed-refs`. git packs refs by writing `packed-refs` before it deletes the
    loose files, so a ref missing from both places was absent. A reftable store,
    or anything unexpected, is git's to answer (False)."""
    if not _SHARED_REF.match(ref) or ".." in ref or "//" in ref or ref.endswith((".lock", "/")):
        return False
    if os.path.lexists(common_dir / ref) or os.path.lexists(common_dir / "reftable"):
        return False
    try:
        fd = os.open(common_dir / "packed-refs", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        return False
    finally:
        os.close(fd)
    return f" {ref}\n".encode() not in b"".join(chunks)


def discover(start: Path | None = None, settings: Settings | None = None) -> Repository:
    """The repository that contains `start` (default: the current folder), seen with
    `settings` (default: those of the environment).

    Reads nothing of the other worktrees: `git worktree list` fails ("failed to read
    .git/worktrees/X/commondir") while another process is adding a worktree, and
    forge runs add worktrees all the time.
    """
    here = (start or Path.cwd()).resolve()
    settings = settings if settings is not None else Settings.from_env()
    check_git_version()
    cp = proc.run(
        [
            "git",
            "rev-parse",
            "--path-format=absolute",
            "--is-bare-repository",
            "--show-toplevel",
            "--git-common-dir",
            "--git-dir",
        ],
        cwd=here,
        check=False,
    )
    lines = cp.stdout.splitlines()
    if lines[:1] == ["true"]:  # rev-parse prints this, then fails on --show-toplevel
        raise ForgeError(f"{here} is a bare repository: forge needs a working tree")
    if cp.returncode != 0:
        if "not a git repository" in cp.stderr:
            raise ForgeError(f"{here} is not in a git repository (run `git init` first)")
        raise ForgeError(f"git cannot read the repository at {here}: {proc.tail(cp.stderr, 1)}")
    if len(lines) < 4:
        raise ForgeError(f"{here} is inside a git directory, not a working tree")
    root = Path(lines[1]).resolve()
    common, git_dir = (
        (Path(line) if Path(line).is_absolute() else root / line).resolve() for line in lines[2:4]
    )
    return Repository(
        root=root,
        common_dir=common,
        main_root=main_worktree(root, common, git_dir),
        settings=settings,
    )


def main_worktree(root: Path, common: Path, git_dir: Path) -> Path:
    """The main worktree, found as git finds it (worktree.c: the common dir less its
    `/.git`), without listing the worktrees."""
    if common.name == ".git":
        return common.parent
    if git_dir == common:  # the main worktree itself, with a separate git dir
        return root
    # A linked worktree of a repository whose git dir stands apart (or is bare):
    # `git worktree list` names the common dir, and so does forge.
    return common
