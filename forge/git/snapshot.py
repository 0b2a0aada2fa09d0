"""A fingerprint of the user's side of the repository: their branches, HEAD, index,
working tree, config, hooks and object store (forge/git/objstore.py). Taken when `forge run` starts and when it ends, so
"not touched" is a measurement, and a change is named (refs, paths) instead.

The working tree is what `git status` shows (tracked files changed, files not
ignored that are new) plus the size and modification time of each such path, so a
file that was already modified and is written again still counts. Ignored files
are not looked at. `GIT_OPTIONAL_LOCKS=0` keeps our own `git status` from
refreshing the user's index.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field, replace
from pathlib import Path

from forge.base.text import one_line
from forge.frozen import frozen
from forge.git import gitfiles, objstore
from forge.git.repo import Repository

_QUIET = {"GIT_OPTIONAL_LOCKS": "0"}
_LIMIT = 8  # paths named per kind of change


@frozen
class Snapshot:
    head: str  # "ref:<name>" or the detached commit
    head_commit: str
    refs: dict[str, str]  # the user's branches, tags and stash (forge's own excluded)
    index: dict[str, str]  # path -> "mode oid stage"
    tree: dict[str, str]  # path -> "XY size mtime" for what `git status` shows
    files: dict[str, str] = field(default_factory=dict)  # config, hooks -> content hash
    objects: dict[str, objstore.Entry] = field(default_factory=dict)  # object files -> stat
    store: Path | None = None  # the object store `objects` was read from

    def changes_since(self, before: Snapshot) -> list[str]:
        """What differs from `before`, one line per kind, named; [] when nothing."""
        out = []
        if self.head != before.head or self.head_commit != before.head_commit:
            out.append(f"HEAD moved: {_show_head(before)} -> {_show_head(self)}")
        moved = _diff(before.refs, self.refs)
        if moved:
            out.append("refs changed: " + _names(moved, strip="refs/heads/"))
        staged = _diff(before.index, self.index)
        if staged:
            out.append("index changed: " + _names(staged))
        edited = _diff(before.tree, self.tree)
        if edited:
            out.append("working tree changed: " + _names(edited))
        other = _diff(before.files, self.files)
        if other:
            out.append(f"{gitfiles.CHANGED}: " + _names(other))
        if before.store is not None:
            out += objstore.changes(before.store, before.objects, self.objects)
        return out

    def with_move(self, repo: Repository, ref: str, old: str, new: str) -> Snapshot:
        """This snapshot as it would be had forge itself moved the user's checked-out
        branch `ref` from `old` to `new` (`forge accept --now` during a run): the
        ref, HEAD and the index entries of the paths the move changed, so the move
        is not reported as a change someone else made."""
        if self.refs.get(ref) != old:
            return self
        refs = {**self.refs, ref: new}
        head_commit = self.head_commit
        if self.head == f"ref:{ref}" and head_commit == old:
            head_commit = new
        index = dict(self.index)
        changed = repo.git("diff-tree", "-r", "-z", "--no-renames", "--name-only", old, new)
        paths = {p for p in changed.split("\0") if p}
        for path in paths:
            index.pop(path, None)
        for entry in repo.git("ls-tree", "-r", "-z", "--full-tree", new).split("\0"):
            meta, _, path = entry.partition("\t")
            if path in paths:
                mode, _, oid = meta.split(" ")
                index[path] = f"{mode} {oid} 0"
        return replace(self, refs=refs, head_commit=head_commit, index=index)


def take(repo: Repository) -> Snapshot:
    store = repo.common_dir / "objects"
    # The object store is listed while git answers the questions below (a listing of
    # 10k files is mostly system calls, which let the other threads run); the working
    # tree's status, the longest of them on a large repository, runs beside the others,
    # and they beside one another.
    with ThreadPoolExecutor(max_workers=4) as pool:
        objects = pool.submit(objstore.fingerprint, store)
        status = pool.submit(_status, repo)
        head_ref = pool.submit(repo.try_git, "symbolic-ref", "--quiet", "HEAD")
        head_commit = pool.submit(repo.try_git, "rev-parse", "--verify", "--quiet", "HEAD")
        refs, index = _refs(repo), _index(repo)
        ref_name = head_ref.result().stdout.strip()
        commit = head_commit.result().stdout.strip()
        return Snapshot(
            head=f"ref:{ref_name}" if ref_name else commit,
            head_commit=commit,
            refs=refs,
            index=index,
            tree=_tree(repo.root, status.result()),
            files=_git_files(repo),
            objects=objects.result(),
            store=store,
        )


def _refs(repo: Repository) -> dict[str, str]:
    """The user's branches, tags and stash; forge's own branches left out."""
    out = repo.git(
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        "refs/heads",
        "refs/tags",
        "refs/stash",
        "refs/replace",  # a replace ref changes what every git command reads
    )
    refs = {}
    for line in out.splitlines():
        oid, _, ref = line.partition(" ")
        if not ref.startswith("refs/heads/forge/"):
            refs[ref] = oid
    return refs


def _index(repo: Repository) -> dict[str, str]:
    staged = repo.git("ls-files", "--stage", "-z", cwd=repo.root, env=_QUIET)
    index = {}
    for entry in staged.split("\0"):
        if entry:
            meta, _, path = entry.partition("\t")
            index[path] = meta
    return index


# A person writes plans while a run runs (`forge draft -o plans/next.toml`, an editor):
# a new file there is theirs and forge's own folder for plans, not a change by a task.
_PLANS = "plans/"


def _tree(root: Path, status: str) -> dict[str, str]:
    """What `git status` shows, each path with its size and mtime (untracked files in
    `plans/` left out)."""
    tree = {}
    for entry in status.split("\0"):
        if len(entry) > 3:
            path = entry[3:]
            if entry.startswith("??") and path.startswith(_PLANS):
                continue
            tree[path] = f"{entry[:2]} {_stat(root / path)}"
    return tree


def _status(repo: Repository) -> str:
    return repo.git(
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        cwd=repo.root,
        env=_QUIET,
    )


def _git_files(repo: Repository) -> dict[str, str]:
    """The user's config, hooks and what else changes git's answers: a task must not
    change what runs on, or what is seen by, their next git command."""
    found = {}
    common = repo.common_dir
    for name in gitfiles.names(common):
        found[name] = _hash(common / name)
    return found


def _hash(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "absent"


def _stat(path: Path) -> str:
    try:
        st = os.lstat(path)
    except OSError:
        return "absent"
    return f"{st.st_size} {st.st_mtime_ns}"


def _diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k))


def _names(keys: list[str], *, strip: str = "") -> str:
    shown = [one_line(k.removeprefix(strip)) for k in keys[:_LIMIT]]
    more = f" and {len(keys) - _LIMIT} more" if len(keys) > _LIMIT else ""
    return ", ".join(shown) + more


def _show_head(s: Snapshot) -> str:
    name = s.head.removeprefix("ref:refs/heads/") if s.head.startswith("ref:") else "detached"
    return f"{name} at {s.head_commit[:12] or 'nothing'}"
