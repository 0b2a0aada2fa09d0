"""Verification checkouts: detached checkouts of forge's own, one per lane, each a
contained repository (forge/git/contained.py), so a verifier's git commands reach
neither the user's refs nor forge's records.

A lane runs in `<worktrees root>/.verify/<key>/<lane>`, never in the user's working
tree. Each lane has a checkout of its own so that a lane which writes into its tree
is the one blamed for it, and so that restoring a tree never pulls files from under
another lane that is still running. A checkout is moved from commit to commit with
`git checkout`, which rewrites only the files that differ.

A fingerprint is what `git status --porcelain` shows plus HEAD: tracked files edited
or deleted, new files that are not ignored; and what hides a change from `git status`
(forge/verify/hermetic.py). Ignored files (caches, build output) do not count, and
are removed before every run: only what the plan's `setup` made survives.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from forge.base.files import read_json_or, write_json
from forge.base.liveness import Owner
from forge.base.text import one_line
from forge.errors import Busy, ForgeError
from forge.frozen import frozen
from forge.git import contained, worktrees
from forge.git.contained import Contained
from forge.git.repo import Repository, short_sha
from forge.layers.view import Begun
from forge.verify import hermetic

HIDDEN = "!! "  # a fingerprint entry of what hides a change from `git status`
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_key(key: str) -> None:
    if not _KEY.match(key) or ".." in key:
        raise ForgeError(
            f"verification key '{key}' is not valid: use letters, digits, `.`, `_` and `-`"
        )


def checkout_path(repo: Repository, key: str, lane: str) -> Path:
    return repo.worktrees_root() / ".verify" / key / lane


@frozen
class Fingerprint:
    head: str
    entries: frozenset[str]  # porcelain lines: "XY path"; HIDDEN + what hides a change

    @property
    def hides(self) -> bool:
        return any(e.startswith(HIDDEN) for e in self.entries)

    def changes_since(self, before: Fingerprint) -> list[str]:
        """The paths that differ between two fingerprints (HEAD named when it moved),
        as shown to people (a byte that is not UTF-8 as `\\377`)."""
        paths = {one_line(e[3:]) for e in self.entries ^ before.entries}
        out = sorted(paths)
        if self.head != before.head:
            out.insert(0, f"HEAD (moved to {short_sha(self.head) or 'nothing'})")
        return out


@frozen
class Checkout:
    repo: Repository
    path: Path
    marker: Path  # exists while a run may have left changes forge must undo
    setup: str | None = None  # the digest of the plan's setup (None: it has none)

    @property
    def git_dir(self) -> Path:
        return Contained(self.repo, self.path).git_dir

    @property
    def setup_file(self) -> Path:
        """What setup made in the checkout, kept out of the checkout's reach."""
        return self.marker.with_suffix(".setup.json")

    def git(self, *args: str) -> str:
        return Contained(self.repo, self.path, strict=False).git(*args)

    def products(self) -> list[str] | None:
        """The paths the plan's current setup made here (None: it has not run here)."""
        if self.setup is None:
            return []
        data = read_json_or(self.setup_file, None, what="setup products")
        if not isinstance(data, dict) or data.get("setup") != self.setup:
            return None
        return [str(p) for p in data.get("paths", [])]

    def record_products(self) -> None:
        """Call after the setup ran on a scrubbed checkout: what is untracked now is
        what it made, and what it made as it was when setup ended."""
        paths = hermetic.untracked(self.path, self.git_dir)
        sums = hermetic.products_fingerprint(self.path, paths)
        pyc = hermetic.bytecode(self.path, paths)
        write_json(self.setup_file, {"setup": self.setup, "paths": paths, "sums": sums, "pyc": pyc})

    def drop_bytecode(self) -> None:
        """The bytecode in setup's products that a run wrote or rewrote, removed (the
        products fingerprint leaves Python's caches out)."""
        data = read_json_or(self.setup_file, None, what="setup products")
        if isinstance(data, dict) and isinstance(data.get("pyc"), dict):
            kept = {str(k): str(v) for k, v in data["pyc"].items()}
            hermetic.drop_bytecode(self.path, [str(p) for p in data.get("paths", [])], kept)

    def products_intact(self) -> bool:
        """Setup's products are as setup left them (a run that wrote a `.pth` into
        setup's `.venv` has changed them: setup is run again before the next run)."""
        data = read_json_or(self.setup_file, None, what="setup products")
        if not isinstance(data, dict) or not isinstance(data.get("sums"), str):
            return False
        paths = [str(p) for p in data.get("paths", [])]
        return bool(hermetic.products_fingerprint(self.path, paths) == data["sums"])

    def scrub(self, *, keep: list[str] | None = None) -> None:
        """Remove every untracked and ignored path but setup's products (or `keep`)."""
        keep = (self.products() or []) if keep is None else keep
        hermetic.scrub(self.path, self.git_dir, keep=keep)

    def fingerprint(self) -> Fingerprint:
        # One status call says HEAD too (`--branch`): a lane run pays for two of these.
        out = self.git(
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
        )
        _, entries = _porcelain(out)
        # HEAD as the checkout's own `.git` has it, read as files (never through git),
        # put there first if forge owes it one (what a lane's command then sees)
        own = Contained(self.repo, self.path, strict=False)
        own.settle()
        head = own.task_head() or ""
        entries |= {f"{HIDDEN}{e}" for e in hermetic.hidden(self.path, self.git_dir)}
        return Fingerprint(head=head, entries=frozenset(entries))

    def restore(self, commit: str, *, unflag: bool = True) -> None:
        """Put the checkout back to exactly `commit` plus setup's products: undo
        edits and index flags, remove every other untracked or ignored path.
        `unflag=False`: the last fingerprint showed nothing hidden (a call saved)."""
        own = Contained(self.repo, self.path, strict=False)
        own.guard()
        if unflag:
            hermetic.unflag(self.path, self.git_dir)
        was = own.head()
        self.git("checkout", "--quiet", "--force", "--detach", commit)
        self.git("reset", "--quiet", "--hard", commit)
        if was != commit and self._attributes_moved(was, commit):
            # git rewrites only the files whose blobs differ; a new `*.sh eol=crlf`
            # changes none of them, and the checkout would not be what a clone is. An
            # index without stat data makes every file differ: all are written anew.
            self.git("read-tree", commit)
            self.git("checkout-index", "--all", "--force", "--index")
        self.scrub()

    def _attributes_moved(self, was: str, commit: str) -> bool:
        changed = self.git("diff", "--name-only", "-z", "--no-renames", was, commit)
        return any(p.rsplit("/", 1)[-1] == ".gitattributes" for p in changed.split("\0"))

    def begin(self) -> Begun:
        """Before a run: what the checkout holds (the run runs as it is)."""
        before = self.fingerprint()
        write_json(self.marker, {"path": str(self.path)})
        return Begun((), before)

    def finish(self, begun: Begun, commit: str) -> list[str]:
        """After a run: what it changed, undone (the checkout restored to `commit`)."""
        assert isinstance(begun.state, Fingerprint)
        changed = self.fingerprint().changes_since(begun.state)
        if changed:
            self.restore(commit)
        self.end_run()
        return changed

    def again(self, commit: str) -> None:
        """Before a rerun: what the failed run left must not decide it (it set no
        index flag: that would have changed its checkout, and it would not be rerun)."""
        self.restore(commit, unflag=False)

    def end_run(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.marker.unlink()


def _rebuild_reason(repo: Repository, path: Path) -> str | None:
    """Why the checkout at `path` cannot be used as it is (None: it can)."""
    if not contained.is_contained(path):
        return "its `.git` is gone or is not a folder" if path.exists() else "it does not exist"
    try:
        Contained(repo, path).guard()
    except contained.Tampered as exc:
        return f"its git dir is not forge's as forge left it ({exc})"  # a verifier made a link
    return None


def prepare(
    repo: Repository,
    *,
    key: str,
    lane: str,
    commit: str,
    setup: str | None = None,
    say: Callable[[str], None] = lambda _msg: None,
) -> Checkout:
    """The lane's checkout, created on first use and moved to `commit`.

    Refuses a checkout holding changes forge did not make; changes a killed run of
    forge's own left behind (its marker file is still there) are undone. A checkout
    that must be made anew (and so its setup run again) is said with `say`.
    """
    path = checkout_path(repo, key, lane)
    marker = repo.state.verify_dir / "checkouts" / key / f"{lane}.running"
    co = Checkout(repo=repo, path=path, marker=marker, setup=setup)
    why = _rebuild_reason(repo, path)
    if why is not None:
        if path.exists():
            say(f"checkout {path} must be rebuilt: {why}")
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
    # Index flags and the like are forge's to undo whoever set them: nobody works here.
    found = co.fingerprint()
    dirty = {e for e in found.entries if not e.startswith(HIDDEN)}
    if dirty and not marker.exists():
        sample = ", ".join(sorted(one_line(e[3:]) for e in dirty)[:5])
        raise ForgeError(
            f"verification checkout {path} holds changes forge did not make ({sample}); "
            f"remove the folder (forge creates it again) or undo them with "
            f"`git -C {path} reset --hard && git -C {path} clean -fd`"
        )
    co.restore(commit, unflag=found.hides)
    co.end_run()
    return co


def _porcelain(out: str) -> tuple[str, set[str]]:
    """HEAD and the entries (as `--porcelain=v1` writes them: "XY path") of a
    `git status --porcelain=v2 --branch -z`."""
    head, entries = "", set()
    for e in out.split("\0"):
        if e.startswith("# branch.oid "):
            oid = e.removeprefix("# branch.oid ")
            head = "" if oid == "(initial)" else oid
        elif e.startswith("? "):
            entries.add(f"?? {e[2:]}")
        elif e.startswith("1 "):
            parts = e.split(" ", 8)
            entries.add(f"{parts[1].replace('.', ' ')} {parts[8]}")
        elif e.startswith("u "):
            parts = e.split(" ", 10)
            entries.add(f"{parts[1]} {parts[10]}")
    return head, entries


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
