"""Verification checkouts: detached checkouts of forge's own, one per lane, each a
contained repository (forge/git/contained.py), so a verifier's git commands reach
neither the user's refs nor forge's records.

A lane runs in `<worktrees root>/.verify/<key>/<lane>`, never in the user's working
tree. Each lane has a checkout of its own so that a lane which writes into its tree
is the one blamed for it, and so that restoring a tree never pulls files from under
another lane that is still running. A checkout is moved from commit to commit with
`git checkout`, which rewrites only the files that differ.

A fingerprint is what `git status --porcelain` shows plus HEAD: tracked files edited
or deleted, new files that are not ignored. Ignored files (caches, build output) do
not count, and survive between runs.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from forge.base.files import read_json_or, write_json
from forge.base.liveness import Owner
from forge.errors import Busy, ForgeError
from forge.git import contained, worktrees
from forge.git.contained import Contained
from forge.git.repo import Repository, short_sha

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_key(key: str) -> None:
    if not _KEY.match(key) or ".." in key:
        raise ForgeError(
            f"verification key '{key}' is not valid: use letters, digits, `.`, `_` and `-`"
        )


def checkout_path(repo: Repository, key: str, lane: str) -> Path:
    return repo.worktrees_root() / ".verify" / key / lane


@dataclass(frozen=True)
class Fingerprint:
    head: str
    entries: frozenset[str]  # porcelain lines: "XY path"

    def changes_since(self, before: Fingerprint) -> list[str]:
        """The paths that differ between two fingerprints (HEAD named when it moved)."""
        paths = {e[3:] for e in self.entries ^ before.entries}
        out = sorted(paths)
        if self.head != before.head:
            out.insert(0, f"HEAD (moved to {short_sha(self.head) or 'nothing'})")
        return out


@dataclass(frozen=True)
class Checkout:
    repo: Repository
    path: Path
    marker: Path  # exists while a run may have left changes forge must undo

    def git(self, *args: str) -> str:
        return Contained(self.repo, self.path, strict=False).git(*args)

    def fingerprint(self) -> Fingerprint:
        # HEAD as the checkout's own `.git` has it, read as a file (never through git)
        head = Contained(self.repo, self.path, strict=False).task_head() or ""
        out = self.git(
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
        )
        entries = frozenset(e for e in out.split("\0") if e)
        return Fingerprint(head=head, entries=entries)

    def restore(self, commit: str) -> None:
        """Put the checkout back to exactly `commit`: undo edits, remove new files
        that are not ignored (ignored caches stay)."""
        self.git("checkout", "--quiet", "--force", "--detach", commit)
        self.git("reset", "--quiet", "--hard", commit)
        self.git("clean", "-ffdq")

    def begin_run(self) -> None:
        write_json(self.marker, {"path": str(self.path)})

    def end_run(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.marker.unlink()


def prepare(repo: Repository, *, key: str, lane: str, commit: str) -> Checkout:
    """The lane's checkout, created on first use and moved to `commit`.

    Refuses a checkout holding changes forge did not make; changes a killed run of
    forge's own left behind (its marker file is still there) are undone.
    """
    path = checkout_path(repo, key, lane)
    marker = repo.state.verify_dir / "checkouts" / key / f"{lane}.running"
    co = Checkout(repo=repo, path=path, marker=marker)
    broken = not contained.is_contained(path)
    if not broken:
        try:
            Contained(repo, path).guard()
        except contained.Tampered:
            broken = True  # a verifier made its git dir a link: made again below
    if broken:
        legacy = (path / ".git").is_file()  # a linked worktree an older forge made
        if path.exists():
            # Forge's own folder, but no longer a checkout forge can use (a create that
            # was killed half way, a `.git` a verifier removed): start it again.
            shutil.rmtree(path)
        if legacy:
            worktrees.prune(repo)
        worktrees.add(repo, path, commit, what="verification checkout")
        co.end_run()
        return co
    dirty = co.fingerprint().entries
    if dirty and not marker.exists():
        sample = ", ".join(sorted(e[3:] for e in dirty)[:5])
        raise ForgeError(
            f"verification checkout {path} holds changes forge did not make ({sample}); "
            f"remove the folder (forge creates it again) or undo them with "
            f"`git -C {path} reset --hard && git -C {path} clean -fd`"
        )
    co.restore(commit)
    co.end_run()
    return co


@contextlib.contextmanager
def key_lock(repo: Repository, key: str) -> Iterator[None]:
    """One verification at a time per key: two would fight over the same checkouts."""
    from filelock import FileLock, Timeout

    locks = repo.state.verify_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(locks / f"{key}.lock"))
    owner_file = locks / f"{key}.owner.json"
    try:
        lock.acquire(timeout=0)
    except Timeout:
        holder = read_json_or(owner_file, None, what="verification lock owner")
        who = Owner.from_dict(holder).describe() if isinstance(holder, dict) else "another process"
        raise Busy(f"verification '{key}' is busy: {who} is running it") from None
    try:
        write_json(owner_file, Owner.me("verify").to_dict())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            owner_file.unlink()
        lock.release()
