"""Worktree slots: each running task has a checkout of its own, but checkouts are
reused across tasks. Making one costs ~1 s on a large repository and moving one to
another commit ~0.1 s, so a slot is moved, not recreated.

A slot is a contained repository (forge/git/contained.py): a repository of its own
borrowing the user's objects, so nothing a task does with git reaches the user's
refs, stash, config or hooks. Its work comes back through `commit_all` (or
`salvage`), which fetches it into the user's repository.

A slot is never moved while it holds uncommitted work; work that must be removed
is first committed to a salvage ref (forge's identity, no hooks), and the ref named.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from forge.base import proc
from forge.base.text import one_line
from forge.errors import ForgeError
from forge.git import contained, known, refs, taskgit
from forge.git.contained import Contained
from forge.git.identity import identity_env
from forge.git.repo import Repository


def prune(repo: Repository) -> None:
    """Forget registrations of linked worktrees whose folders are gone (slots made
    by an older forge, a crash, an rm -rf)."""
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
    """A slot forge made (a contained repository whose `.git` is still a folder)."""
    return contained.is_contained(path)


def add(
    repo: Repository,
    path: Path,
    commit: str,
    *,
    what: str = "worktree",
    stop: threading.Event | None = None,
) -> None:
    """A new slot or checkout at `path`, detached at `commit`: a contained repository
    (the one way forge makes a worktree: task slots and verification checkouts).
    Several may be made at once. A folder in the way that is not one is refused
    when it holds anything. `stop` ends a long checkout early (proc.Stopped); the
    half-made folder is left for the caller to discard."""
    if path.exists() and not is_worktree(path):
        if (path / ".git").is_file() and _drop_legacy(repo, path):
            pass  # a clean linked worktree an older forge made: made again below
        elif any(path.iterdir()):
            raise ForgeError(f"{path} exists and is not a forge worktree; move it away")
        else:
            path.rmdir()  # an add killed before git wrote anything there
    if not path.exists():
        try:
            path.mkdir(parents=True)
        except OSError as exc:
            raise ForgeError(
                f"cannot make the {what} {path}: {exc.strerror or exc}; "
                "set FORGE_WORKTREES (or --worktree-root) to a folder forge may write"
            ) from None
        try:
            contained.create(repo, path, commit=commit, stop=stop)
        except proc.Stopped:
            discard(path)  # stopped half way: nothing of anyone's in it
            raise
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)  # half made: made again next time
            raise


DISCARDED = ".discarded-"


def discard(path: Path) -> None:
    """Remove a half-made slot that holds nothing of anyone's: renamed out of the
    way at once (its name is free again), its files removed in the background
    (tens of thousands of them on a large repository). What a process that ends
    first leaves is removed by the next `sweep_discarded`."""
    contained.remove_view(path)
    if not path.exists():
        return
    aside = path.with_name(f"{path.name}{DISCARDED}{os.getpid()}-{threading.get_ident()}")
    path.rename(aside)
    threading.Thread(target=shutil.rmtree, args=(aside, True), daemon=True).start()


def sweep_discarded(root: Path) -> None:
    """Remove in the background what `discard` left under `root` unfinished."""
    with contextlib.suppress(OSError):
        left = [root / n for n in os.listdir(root) if DISCARDED in n]
        for aside in left:
            threading.Thread(target=shutil.rmtree, args=(aside, True), daemon=True).start()


def _drop_legacy(repo: Repository, path: Path) -> bool:
    """Remove a linked worktree an older forge made as a slot, if it holds no work."""
    cp = repo.try_git("-C", str(path), "status", "--porcelain", "--untracked-files=all")
    if cp.returncode != 0 or cp.stdout.strip():
        return False
    return repo.try_git("worktree", "remove", "--force", str(path)).returncode == 0


def dirty_paths(path: Path, repo: Repository, *, look_only: bool = False) -> list[str]:
    """The paths `git status` lists in the slot at `path`; `look_only`: its index is
    not refreshed either (`forge clean --dry-run` writes nothing)."""
    # NUL-separated (git quotes other names otherwise); no renames: one path an entry.
    env = {"GIT_OPTIONAL_LOCKS": "0"} if look_only else None
    out = Contained(repo, path).git(
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules=all",
        env=env,
    )
    return [entry[3:] for entry in out.split("\0") if entry]


def git(repo: Repository, path: Path, *args: str, check: bool = True) -> proc.Completed:
    """A git command in the slot at `path` (its own git dir, named explicitly)."""
    return Contained(repo, path).run(*args, check=check)


def move(
    repo: Repository,
    path: Path,
    branch: str,
    *,
    clean_all: bool,
    known_clean: bool = False,
    commit: str | None = None,
) -> None:
    """Check `branch` out in the slot at `path`, at `commit` (default: where the
    user's repository has it), rewriting only the files that differ.

    The slot holds a branch of the same name of its own. Refuses a slot holding
    uncommitted work, unless the caller has just seen it clean (`known_clean`: a
    `git status` costs ~0.1 s on a large repository, and is not paid twice). Ignored
    files (installed dependencies, caches) are kept unless `clean_all`, so a slot's
    setup runs once, not once per task.
    """
    slot = Contained(repo, path)
    if not known_clean:
        dirty = dirty_paths(path, repo)
        if dirty:
            raise ForgeError(
                f"worktree {path} holds uncommitted work "
                f"({', '.join(one_line(p) for p in dirty[:5])}); "
                "forge will not move it"
            )
    target = commit or repo.ref_value(branch)
    if target is None:
        raise ForgeError(f"{branch} does not exist")
    short = refs.branch_name(branch)
    slot.git("checkout", "--quiet", "--force", "--no-recurse-submodules", "-B", short, target)
    if clean_all:
        slot.git("clean", "-ffdqx")  # -ff: a nested repository too


def restore(repo: Repository, path: Path, commit: str | None = None) -> None:
    """The slot at `path` back to its committed work (or to `commit`), nothing else
    in its tree but ignored files."""
    git(repo, path, "reset", "--quiet", "--hard", *([commit] if commit else []), check=False)
    git(repo, path, "clean", "-ffdq", check=False)  # -ff: a nested repository too


def detach(repo: Repository, path: Path) -> None:
    """Let go of the slot's branch; files and index stay. HEAD is pointed at the same
    commit directly: a `checkout --detach` would refresh the whole index for nothing."""
    if not is_worktree(path):
        return
    slot = Contained(repo, path)
    with contextlib.suppress(contained.Tampered):
        slot.guard()
        slot.detach_head()


def settle(repo: Repository, path: Path) -> None:
    """The slot's own `.git` brought up to date with forge's (what the next command
    of a task, or a person looking into the slot, sees)."""
    if is_worktree(path):
        with contextlib.suppress(contained.Tampered, OSError):
            Contained(repo, path).settle()


def commit_all(
    repo: Repository,
    path: Path,
    message: str,
    *,
    branch: str,
    identity: Mapping[str, str] | None = None,
) -> str:
    """Commit whatever is in the slot onto what it has checked out, with plumbing: no
    hooks run (the task's check and the verification are forge's gates, and a
    user's pre-commit hook may be slow, interactive or forge's own). Commits the
    agent made itself stay under it (brought into the user's repository with a
    checking fetch). `branch` is moved to the result. Returns the branch's head
    after: unchanged when there was nothing to commit. `identity`: who commits
    (GIT_AUTHOR_* / GIT_COMMITTER_*), when not who git here says the user is."""
    slot = Contained(repo, path)
    slot.guard()
    head = slot.base()
    # The common case pays no walk of the work's new folders: a nested repository
    # either makes `git add` fail (a `.git` naming none, a repository without a
    # commit) or shows as a gitlink the tree did not have, found in the diff of the
    # two trees (as long as what changed, not the whole tree).
    try:
        slot.git("add", "--all")
    except proc.CommandError:
        _refuse_nested(slot, head)
        raise
    tree = slot.git("write-tree").strip()
    head_tree = known.tree(head) or slot.git("rev-parse", f"{head}^{{tree}}").strip()
    links = _gitlinks_added(slot, head_tree, tree) if tree != head_tree else []
    if links:
        _refuse_nested(slot, head, links)
    old = repo.ref_value(branch)
    result = head
    if tree != head_tree:
        env = dict(identity) if identity is not None else identity_env(repo)
        result = slot.git("commit-tree", tree, "-p", head, "-m", message, env=env).strip()
        known.remember(result, tree=tree, parents=(head,))
    slot.point_head(result)  # forge's HEAD, then the task's .git anew
    if result != old:
        repo.update_ref(branch, result, old, message=message)
    return result


class NestedRepository(ForgeError):
    """A task's work holds a git repository of its own (its `.git` now removed)."""


def _gitlinks_added(slot: Contained, old: str, new: str) -> list[str]:
    """Where `new` holds a gitlink (a nested repository's commit) and `old` held
    none: a submodule the task added or a folder that became one."""
    raw = slot.git("diff-tree", "-r", "-z", "--no-renames", old, new)
    # `-z` raw: ":<old mode> <new mode> <old oid> <new oid> <status>\0<path>\0"
    fields = raw.split("\0")
    return [
        path
        for head, path in zip(fields[0::2], fields[1::2], strict=False)
        if head.startswith(":")
        and head.split(" ")[1] == "160000"
        and not head.startswith(":160000")
    ]


def _refuse_nested(slot: Contained, head: str, links: Sequence[str] = ()) -> None:
    """Put the slot's index back at `head`, remove every nested `.git` in the work's
    new folders and refuse the commit, naming the folders (or the gitlinks
    `links`); returns when there is none (the caller's error is another)."""
    slot.git("read-tree", head)
    nested = scrub_nested(slot) or sorted(links)
    if not nested:
        return
    raise NestedRepository(
        "its work holds a git repository of its own: "
        + ", ".join(one_line(p) for p in nested[:8])
        + " (a `.git` in a folder would land as a link to commits your repository"
        " lacks; removed, its files left)"
    )


def scrub_nested(slot: Contained, *, env: Mapping[str, str] | None = None) -> list[str]:
    """Remove every `.git` (a folder or a file) inside the new folders of the work in
    `slot`, where `git add` would make it a gitlink (or fail on a `.git` file naming
    no repository); the folders that held one."""
    out = slot.git("ls-files", "-z", "--others", "--exclude-standard", "--directory", env=env)
    found: list[str] = []
    for entry in (p for p in out.split("\0") if p.endswith("/")):
        for folder, dirs, files in os.walk(slot.path / entry):
            if ".git" in dirs or ".git" in files:
                taskgit.remove(Path(folder) / ".git")
                found.append(os.path.relpath(folder, slot.path))
            dirs[:] = [d for d in dirs if d != ".git"]
    return sorted(found)


def salvage(
    repo: Repository, path: Path, *, plan: str, task: str, dirty: list[str] | None = None
) -> str | None:
    """Commit uncommitted work in `path` to refs/forge/salvage/<plan>/<task>/<n>
    without moving the slot's branch. Returns the ref, or None if clean.
    `dirty`: what the caller's own `dirty_paths` just found (saves a second look)."""
    if not is_worktree(path):
        return None
    if not (dirty if dirty is not None else dirty_paths(path, repo)):
        return None
    slot = Contained(repo, path)
    # An index of its own, unique to this call: salvages of several slots may run
    # at once, and the slot's own index must stay as it is.
    fd, name = tempfile.mkstemp(prefix=f".forge-salvage-index-{os.getpid()}-", dir=path.parent)
    os.close(fd)
    index = Path(name)
    index.unlink()  # git wants to create it; an empty file is not a valid index
    env = {**identity_env(repo), "GIT_INDEX_FILE": str(index)}
    try:
        slot.guard()
        head = slot.base()
        slot.git("read-tree", head, env=env)
        scrub_nested(slot, env=env)
        slot.git("add", "--all", env=env)
        tree = slot.git("write-tree", env=env).strip()
        commit = slot.git(
            "commit-tree", tree, "-p", head, "-m", f"forge: salvage of {plan}/{task}", env=env
        ).strip()
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    return keep(repo, commit, plan=plan, task=task)


def salvage_and_clear(
    repo: Repository, path: Path, *, plan: str, task: str, dirty: list[str] | None = None
) -> str | None:
    """`salvage` the uncommitted work in the slot at `path`, then, that work safe in
    its ref, `restore` the slot to its committed work. Returns the ref, or None when
    there was nothing to keep (the tree is left as it is)."""
    ref = salvage(repo, path, plan=plan, task=task, dirty=dirty)
    if ref is not None:
        restore(repo, path)
    return ref


def keep_local_commits(
    repo: Repository, path: Path, known: str, *, plan: str, task: str
) -> str | None:
    """The salvage ref holding the slot's HEAD when it is not `known` (what the user's
    repository has for the task's branch) nor behind it; None otherwise."""
    if not is_worktree(path):
        return None
    slot = Contained(repo, path)
    slot.guard()
    local = slot.task_head()
    if not local or local == known or not slot.bring_back(local):
        return None
    if repo.try_git("merge-base", "--is-ancestor", local, known).returncode == 0:
        return None
    return keep(repo, local, plan=plan, task=task)


def usable(repo: Repository, path: Path) -> str | None:
    """Why the slot at `path` cannot be used any more (None: it can)."""
    if not path.exists():
        return None
    if not is_worktree(path):
        return f"{path}/.git is gone or is not a directory any more"
    try:
        Contained(repo, path).guard()
    except contained.Tampered as exc:
        return str(exc)
    return None


def set_aside(path: Path) -> Path:
    """Move a slot forge can no longer use out of the way, files kept (forge's own
    git dir of it goes: a new slot gets a new one)."""
    contained.remove_view(path)
    n = 1
    while (aside := path.with_name(f"{path.name}.broken-{n}")).exists():
        n += 1
    path.rename(aside)
    return aside


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
    """Remove a slot. Callers salvage first: this discards what is in it."""
    legacy = (path / ".git").is_file()  # a linked worktree an older forge made
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    contained.remove_view(path)
    if legacy:
        prune(repo)


def disk_usage(path: Path) -> int:
    """Bytes used under `path` (not following links)."""
    return disk_usages([path])[path]


def disk_usages(paths: Sequence[Path]) -> dict[Path, int]:
    """Bytes used under each of `paths` (not following links; 0 for one that is
    gone): one `du` for them all when there is one (a slot of a large repository
    holds tens of thousands of files), else a walk."""
    sizes = dict.fromkeys(paths, 0)
    here = [p for p in paths if p.exists()]
    if here and shutil.which("du"):
        cp = proc.run(["du", "-sb0", *map(str, here)], cwd=Path("/"), check=False)
        for entry in cp.stdout.split("\0") if cp.returncode == 0 else []:
            size, _, name = entry.partition("\t")
            if size.isdigit() and Path(name) in sizes:
                sizes[Path(name)] = int(size)
        here = [p for p in here if sizes[p] == 0]
    for path in here:
        sizes[path] = _walk_size(path)
    return sizes


def _walk_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
