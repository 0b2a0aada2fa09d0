"""Contained repositories: a slot or a verification checkout is a git repository of
its own that borrows the user's objects (`objects/info/alternates`) instead of a
linked worktree.

A linked worktree shares refs, stash, config and hooks with the user's repository,
and `git rev-parse --git-common-dir` leads whatever runs in it to forge's records.
A contained repository shares nothing writable: a task's `git update-ref`,
`branch -f`, `stash`, `config` or hook install lands in its own `.git`. Objects it
writes land in its own object store too; forge brings a task's result back into
the user's repository with `git fetch` (which checks every object it receives),
then moves the task's branch there with the expected old value.

Forge's own git calls in a contained repository name its git dir explicitly (no
discovery, so no climbing into an enclosing repository), and first check that the
task left the git dir usable: a `.git`, index, config, HEAD or refs that became a
link would make forge write through it, so such a repository is refused; the
config and alternates, which a task may rewrite to run commands through forge's
own git calls, are put back to forge's own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from forge.base import proc
from forge.errors import ForgeError
from forge.git.repo import Repository

# Our git calls in a contained repository must not run hooks: not the user's (a
# global core.hooksPath), not one a task installed in its own `.git/hooks`.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
# What a task must not turn into a link: forge writes through these.
_NO_LINKS = (
    "config",
    "index",
    "HEAD",
    "objects",
    "objects/info",
    "refs",
    "refs/heads",
    "packed-refs",
    "info",
)
# Settings of the user's repository a task's own git commands need (an identity to
# commit with, line endings), copied into the contained repository's config.
_COPIED = (
    "user.name",
    "user.email",
    "author.name",
    "author.email",
    "committer.name",
    "committer.email",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.symlinks",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.filemode",
    "i18n.commitencoding",
)


class Tampered(ForgeError):
    """A task made its repository's git dir unusable for forge (removed, a link)."""


@dataclass(frozen=True)
class Contained:
    repo: Repository  # the user's repository, whose objects it borrows
    path: Path  # its working tree; the git dir is `path/.git`

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    def exists(self) -> bool:
        return is_contained(self.path)

    def run(
        self,
        *args: str,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> proc.Completed:
        self.guard()
        argv = ["git", f"--git-dir={self.git_dir}", f"--work-tree={self.path}", *NO_HOOKS, *args]
        extra = {"GIT_CEILING_DIRECTORIES": str(self.path.parent), **(env or {})}
        return proc.run(argv, cwd=self.path, env=extra, input=input, check=check)

    def git(
        self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None
    ) -> str:
        return self.run(*args, env=env, input=input).stdout

    def guard(self) -> None:
        """Refuse a git dir forge would write through into somewhere else; put back the
        config and alternates forge wrote (a task may have changed them)."""
        gd = self.git_dir
        if not is_contained(self.path):
            raise Tampered(f"{self.path}/.git is gone or is not a directory any more")
        for name in _NO_LINKS:
            if (gd / name).is_symlink():
                raise Tampered(f"{self.path}/.git/{name} was replaced by a link")
        _put(gd / "config", config_text(self.repo))
        _put(gd / "objects" / "info" / "alternates", f"{self.repo.common_dir / 'objects'}\n")

    def owns_objects(self) -> bool:
        """Has anything written objects into this repository's own store?"""
        objects = self.git_dir / "objects"
        try:
            names = os.listdir(objects)
            packs = os.listdir(objects / "pack") if "pack" in names else []
        except OSError:
            return True
        return bool(packs) or any(n not in ("info", "pack") for n in names)

    def direct_env(self) -> dict[str, str]:
        """For forge's own writes while the repository's own store is empty: git then
        writes the objects it hashes itself straight into the user's store, which
        saves a fetch. Not once a task wrote objects of its own: an index entry may
        name one, and a tree written here would then lack it in the user's store."""
        if self.owns_objects():
            return {}
        return {
            "GIT_OBJECT_DIRECTORY": str(self.repo.common_dir / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.git_dir / "objects"),
        }

    def bring_back(self, commit: str, *, marked: bool = False) -> None:
        """Copy `commit` and what it needs from this repository's own object store into
        the user's: `git fetch` checks each object it receives, so a task cannot plant
        a corrupt object in the user's store. `marked`: RESULT_REF already names it."""
        if not marked:
            self.git("update-ref", "--no-deref", RESULT_REF, commit)
        self.repo.git(
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            str(self.git_dir),
            RESULT_REF,
        )


def ceiling_env(path: Path) -> dict[str, str]:
    """For commands run in the slot or checkout at `path`: their git never climbs out
    of it into an enclosing repository (a task that removed its `.git`)."""
    mine = str(path.parent)
    have = os.environ.get("GIT_CEILING_DIRECTORIES")
    return {"GIT_CEILING_DIRECTORIES": f"{mine}:{have}" if have else mine}


RESULT_REF = "refs/forge/result"  # in the contained repository: what forge fetches


def is_contained(path: Path) -> bool:
    git = path / ".git"
    return git.is_dir() and not git.is_symlink()


def create(repo: Repository, path: Path, *, commit: str) -> Contained:
    """A new contained repository at `path` (an empty or absent folder), detached at
    `commit` with its files checked out."""
    repo_fmt = _object_format(repo)
    # `--template=` : no sample hooks, no description; nothing but what git needs.
    proc.run(
        ["git", "init", "--quiet", "--template=", f"--object-format={repo_fmt}", str(path)],
        cwd=path.parent,
        env={"GIT_CEILING_DIRECTORIES": str(path.parent)},
    )
    (path / ".git" / "objects" / "info").mkdir(parents=True, exist_ok=True)
    c = Contained(repo, path)
    c.guard()  # writes forge's config and the alternates
    c.git("checkout", "--quiet", "--force", "--no-recurse-submodules", "--detach", commit)
    return c


_lock = threading.Lock()
_configs: dict[Path, str] = {}
_formats: dict[Path, str] = {}


def _object_format(repo: Repository) -> str:
    with _lock:
        fmt = _formats.get(repo.common_dir)
    if fmt is None:
        cp = repo.try_git("rev-parse", "--show-object-format")
        fmt = cp.stdout.strip() if cp.returncode == 0 and cp.stdout.strip() else "sha1"
        with _lock:
            _formats[repo.common_dir] = fmt
    return fmt


def config_text(repo: Repository) -> str:
    """The config forge writes into every contained repository of `repo`."""
    with _lock:
        text = _configs.get(repo.common_dir)
    if text is not None:
        return text
    fmt = _object_format(repo)
    lines = [
        "[core]",
        f"\trepositoryformatversion = {1 if fmt != 'sha1' else 0}",
        "\tbare = false",
        "\tlogallrefupdates = true",
        "\thooksPath = /dev/null",
        "\tfsmonitor = false",
        "[gc]",
        "\tauto = 0",
        "[maintenance]",
        "\tauto = false",
    ]
    if fmt != "sha1":
        lines += ["[extensions]", f"\tobjectformat = {fmt}"]
    cp = repo.try_git("config", "--null", "--get-regexp", _copied_regexp())
    for entry in cp.stdout.split("\0") if cp.returncode == 0 else []:
        key, _, value = entry.partition("\n")
        section, _, name = key.rpartition(".")
        if key in _COPIED and section and "." not in section:
            lines += [f"[{section}]", f"\t{name} = {_quote(value)}"]
    text = "\n".join(lines) + "\n"
    with _lock:
        _configs[repo.common_dir] = text
    return text


def _copied_regexp() -> str:
    return "^(" + "|".join(k.replace(".", "\\.") for k in _COPIED) + ")$"


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _put(path: Path, text: str) -> None:
    """Write `text` to `path` unless it already holds exactly that (a read is cheaper
    than a write, and this runs before every git call in the repository)."""
    try:
        with path.open("rb") as fh:
            if fh.read(len(text) + 1) == text.encode():
                return
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.forge-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
