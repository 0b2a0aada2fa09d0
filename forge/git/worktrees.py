"""Worktree slots: each running task has a worktree of its own, but worktrees are
reused across tasks. Adding a worktree costs ~1 s on a large repository and
moving one to another commit ~0.1 s, so a slot is moved, not recreated.

A slot is never moved while it holds uncommitted work; work that must be removed
is first committed to a salvage ref (forge's identity, no hooks), and the ref named.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

from forge.base import proc
from forge.base.text import one_line
from forge.errors import ForgeError
from forge.git import refs
from forge.git.identity import identity_env
from forge.git.repo import Repository


def prune(repo: Repository) -> None:
    """Forget registrations of worktrees whose folders are gone (a crash, an rm -rf)."""
    repo.try_git("worktree", "prune")


def registered(repo: Repository) -> list[Path]:
    """The linked worktrees git knows, read from their admin folders
    (`<common dir>/worktrees/<id>/gitdir` names `<worktree>/.git`). Not `git worktree
    list`: it fails while another process is adding a worktree, whose admin folder is
    still half written; such a one is skipped here."""
    return [path for _admin, path in _admin_folders(repo)]


def checked_out(repo: Repository) -> dict[str, Path]:
    """Branch ref -> the worktree that has it checked out, read from each worktree's
    HEAD file (not `git worktree list`, for the same reason as `registered`)."""
    found: dict[str, Path] = {}
    heads = [(repo.common_dir / "HEAD", repo.main_root)]
    heads += [(admin / "HEAD", path) for admin, path in _admin_folders(repo)]
    for head, path in heads:
        try:
            text = head.read_text().strip()
        except OSError:
            continue
        if text.startswith("ref: "):
            found[text[len("ref: ") :]] = path
    return found


def _admin_folders(repo: Repository) -> list[tuple[Path, Path]]:
    """(admin folder, worktree) of each linked worktree whose admin folder is whole."""
    found = []
    with contextlib.suppress(OSError):
        for admin in sorted((repo.common_dir / "worktrees").iterdir()):
            try:
                gitdir = (admin / "gitdir").read_text().strip()
            except OSError:
                continue
            if gitdir:
                found.append((admin, Path(gitdir).parent))
    return found


def is_worktree(path: Path) -> bool:
    return (path / ".git").is_file()


# Our git commands in a checkout of forge's own must not run the user's hooks
# (post-checkout, ...).
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


def add(
    repo: Repository,
    path: Path,
    commit: str,
    *,
    what: str = "worktree",
    hooks: bool = True,
) -> None:
    """A new detached worktree at `path` (the one way forge makes a worktree: task
    slots and verification checkouts; `hooks=False` keeps the user's post-checkout
    hook out of forge's own checkouts). Several may be added at once: git marks a
    worktree it is still making as locked, so a concurrent `prune` leaves it alone.
    Stale registrations are pruned once per run (`prune`), not once per add.
    A folder in the way that is not a worktree is refused when it holds anything."""
    if path.exists() and not is_worktree(path):
        if any(path.iterdir()):
            raise ForgeError(f"{path} exists and is not a forge worktree; move it away")
        path.rmdir()  # an add killed before git wrote anything there
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ForgeError(
                f"cannot make the {what} {path}: {exc.strerror or exc}; "
                "set FORGE_WORKTREES (or --worktree-root) to a folder forge may write"
            ) from None
        options = () if hooks else NO_HOOKS
        repo.git(*options, "worktree", "add", "--quiet", "--detach", str(path), commit)


def dirty_paths(path: Path, repo: Repository) -> list[str]:
    # NUL-separated (git quotes other names otherwise); no renames: one path an entry.
    out = repo.git(
        "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", cwd=path
    )
    return [entry[3:] for entry in out.split("\0") if entry]


def move(
    repo: Repository, path: Path, branch: str, *, clean_all: bool, known_clean: bool = False
) -> None:
    """Check `branch` out in the slot at `path`, rewriting only the files that differ.

    Refuses a slot holding uncommitted work, unless the caller has just seen it
    clean (`known_clean`: a `git status` costs ~0.1 s on a large repository, and
    is not paid twice). Ignored files (installed dependencies, caches) are kept
    unless `clean_all`, so a slot's setup runs once, not once per task.
    """
    if not known_clean:
        dirty = dirty_paths(path, repo)
        if dirty:
            raise ForgeError(
                f"worktree {path} holds uncommitted work "
                f"({', '.join(one_line(p) for p in dirty[:5])}); "
                "forge will not move it"
            )
    short = refs.branch_name(branch)
    repo.git("checkout", "--quiet", "--force", "--no-recurse-submodules", short, cwd=path)
    if clean_all:
        repo.git("clean", "-fdqx", cwd=path)


def detach(repo: Repository, path: Path) -> None:
    """Let go of the branch (so it can be deleted or checked out elsewhere); files and
    index stay. HEAD is pointed at the same commit directly: a `checkout --detach`
    would refresh the whole index for nothing."""
    if not is_worktree(path):
        return
    head = repo.try_git("rev-parse", "--verify", "--quiet", "HEAD", cwd=path).stdout.strip()
    if head:
        repo.try_git("update-ref", "--no-deref", "HEAD", head, cwd=path)


def commit_all(repo: Repository, path: Path, message: str, *, branch: str) -> str:
    """Commit whatever is in the worktree onto `branch` (checked out there) with
    plumbing: no hooks run (the task's check and the verification are forge's
    gates, and a user's pre-commit hook may be slow, interactive or forge's own).
    Commits the agent made itself stay under it. Returns the branch's head after:
    unchanged when there was nothing to commit."""
    repo.git("add", "--all", cwd=path)
    tree = repo.git("write-tree", cwd=path).strip()
    head = repo.git("rev-parse", "HEAD", cwd=path).strip()
    if tree == repo.tree_of(head):
        return head
    env = identity_env(repo)
    commit = repo.git("commit-tree", tree, "-p", head, "-m", message, cwd=path, env=env).strip()
    repo.update_ref(branch, commit, head, message=message)
    return commit


def salvage(
    repo: Repository, path: Path, *, plan: str, task: str, dirty: list[str] | None = None
) -> str | None:
    """Commit uncommitted work in `path` to refs/forge/salvage/<plan>/<task>/<n>
    without moving the worktree's branch. Returns the ref, or None if clean.
    `dirty`: what the caller's own `dirty_paths` just found (saves a second look)."""
    if not is_worktree(path):
        return None
    if not (dirty if dirty is not None else dirty_paths(path, repo)):
        return None
    # An index of its own, unique to this call: salvages of several slots may run
    # at once, and the worktree's own index must stay as it is.
    fd, name = tempfile.mkstemp(prefix=f".forge-salvage-index-{os.getpid()}-", dir=path.parent)
    os.close(fd)
    index = Path(name)
    index.unlink()  # git wants to create it; an empty file is not a valid index
    env = {**identity_env(repo), "GIT_INDEX_FILE": str(index)}
    try:
        head = repo.git("rev-parse", "HEAD", cwd=path).strip()
        repo.git("read-tree", head, cwd=path, env=env)
        repo.git("add", "--all", cwd=path, env=env)
        tree = repo.git("write-tree", cwd=path, env=env).strip()
        commit = repo.git(
            "commit-tree",
            tree,
            "-p",
            head,
            "-m",
            f"forge: salvage of {plan}/{task}",
            cwd=path,
            env=env,
        ).strip()
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    return keep(repo, commit, plan=plan, task=task)


_KEEP_LOCK = threading.Lock()


def keep(repo: Repository, commit: str, *, plan: str, task: str) -> str:
    """The salvage ref holding `commit`: an existing refs/forge/salvage/<plan>/<task>/<n>
    that already points at it, else the next free <n>. The one namer of salvage refs."""
    prefix = refs.salvage_refs(plan, task)
    with _KEEP_LOCK:
        taken = {}
        for line in repo.git(
            "for-each-ref", "--format=%(refname) %(objectname)", prefix
        ).splitlines():
            ref, _, oid = line.partition(" ")
            taken[ref] = oid
            if oid == commit:
                return ref
        n = 1
        while f"{prefix}{n}" in taken:
            n += 1
        repo.update_ref(f"{prefix}{n}", commit, None, message="forge: salvage")
        return f"{prefix}{n}"


def remove(repo: Repository, path: Path) -> None:
    """Remove a worktree. Callers salvage first: this discards what is in it."""
    if is_worktree(path):
        repo.try_git("worktree", "remove", "--force", "--force", str(path))
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    prune(repo)


def disk_usage(path: Path) -> int:
    """Bytes used under `path` (not following links): `du` when there is one (a
    slot of a large repository holds tens of thousands of files), else a walk."""
    cp = (
        proc.run(["du", "-sb", str(path)], cwd=Path("/"), check=False)
        if shutil.which("du")
        else None
    )
    if cp is not None and cp.returncode == 0 and cp.stdout.split():
        return int(cp.stdout.split()[0])
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
