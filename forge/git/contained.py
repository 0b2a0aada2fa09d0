"""Contained repositories: a slot or a verification checkout is a git repository of
its own that borrows the user's objects (`objects/info/alternates`) instead of a
linked worktree.

A linked worktree shares refs, stash, config and hooks with the user's repository,
and `git rev-parse --git-common-dir` leads whatever runs in it to forge's records.
A contained repository shares nothing writable: a task's `git update-ref`,
`branch -f`, `stash`, `config` or hook install lands in its own `.git`.

forge's own git never runs over that `.git`: what a task or a verification left
there (config with filters or fsmonitor, `info/attributes`, `commondir`, a
`gitdir:` file, links under `logs/`, `refs/`, `objects/`) is read by no git
command of forge's and written through by none. forge works on a git dir of its
own beside the folder (`<folder>.git`: config, HEAD, index, refs), named with
`--git-dir`/`--work-tree`, under an environment it controls (no system or global
config, no hooks, no fsmonitor, no attributes file, submodules left alone), its
objects written straight into the user's store. The task's `.git` is read only
as files (forge/git/taskgit.py): the commit it has checked out, and the objects
it wrote, which `git fetch` brings into the user's store checking each one.
Whenever forge moves its own HEAD or index, the folder owes the task a fresh `.git`
(HEAD, branch, index, forge's config): it is put there before the next command of
the task's runs in the folder (`settle`), once however often forge moved in
between (a slot's index is megabytes on a large repository).
In the sandbox the `<folder>.git` is outside what the task may write.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path

from forge.base import proc
from forge.errors import ForgeError
from forge.frozen import frozen
from forge.git import taskgit
from forge.git.repo import Repository

# Our git calls must not run hooks (not the user's, not one a task installed), nor
# an fsmonitor, nor recurse into a submodule a task planted (its own config).
NO_HOOKS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.splitIndex=false",
    "-c",
    "submodule.recurse=false",
    "-c",
    "diff.ignoreSubmodules=all",
    "-c",
    "protocol.allow=never",
    "-c",
    "protocol.file.allow=always",
)
# A checkout of many files (a new slot, a verification checkout) is written by one
# worker per core: creating files one after another is the slow part (about 3x on
# 50k files here); checkouts of under 100 files, a slot's usual move, stay serial.
PARALLEL_CHECKOUT = ("-c", "checkout.workers=0")
# No system or global config (forge's git dir holds the identity it needs), no
# system attributes, no replace refs: what forge's git does is forge's config only.
HARDENED = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
}
# What must not be a link in forge's own git dir: forge writes through these.
_NO_LINKS = ("config", "index", "HEAD", "objects", "objects/info", "refs", "refs/heads", "logs")
# What git would read from a git dir beside config: never in forge's.
_NEVER = ("commondir", "info", "hooks", "gitdir", "shallow", "packed-refs.lock")
_CHANGES_HEAD = frozenset({"checkout", "reset", "update-ref", "read-tree"})
VIEW_SUFFIX = ".git"  # forge's own git dir of the folder F: F.git beside it
# Settings of the user's repository a task's own git commands need (an identity to
# commit with, line endings, what to ignore), copied into the contained repository's
# config.
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
    "core.excludesfile",
    "i18n.commitencoding",
)


# Filter drivers of the user's own config (repository, global, system), copied so
# that forge's commits are what theirs would be (git-lfs stores pointers, not
# content); a task's own config is never read.
_FILTER = re.compile(r"^filter\..+\.(clean|smudge|process|required)$")


class Tampered(ForgeError):
    """A task made its repository's git dir unusable for forge (removed, a link)."""


@frozen
class Contained:
    repo: Repository  # the user's repository, whose objects it borrows
    path: Path  # its working tree; the task's own git dir is `path/.git`
    # Refuse a folder whose own `.git` is gone or replaced (a task's slot). A
    # verification checkout is not refused: its fingerprint names what changed.
    strict: bool = True
    # Guarded once per instance (one of forge's operations: a commit, a move), not
    # before each of its git commands: none of the task's runs in between.
    _guarded: list[bool] = field(default_factory=list, compare=False, repr=False)

    @property
    def git_dir(self) -> Path:
        """forge's own git dir for this folder (outside it)."""
        return view_dir(self.path)

    @property
    def task_git(self) -> Path:
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
        if not self._guarded:
            self.guard()
        if args and args[0] in _CHANGES_HEAD and not (env and "GIT_INDEX_FILE" in env):
            self.owe()  # written before the move: a kill -9 in it still owes the hand-over
        return self._git(args, check=check, env=env, input=input)

    def _git(
        self,
        args: tuple[str, ...],
        *,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        stop: threading.Event | None = None,
    ) -> proc.Completed:
        argv = [
            "git",
            f"--git-dir={self.git_dir}",
            f"--work-tree={self.path}",
            *NO_HOOKS,
            *PARALLEL_CHECKOUT,
            *args,
        ]
        extra = {
            **HARDENED,
            "GIT_CEILING_DIRECTORIES": str(self.path.parent),
            "GIT_OBJECT_DIRECTORY": str(self.repo.common_dir / "objects"),
            **(env or {}),
        }
        return proc.run(argv, cwd=self.path, env=extra, input=input, check=check, stop=stop)

    def git(
        self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None
    ) -> str:
        return self.run(*args, env=env, input=input).stdout

    def guard(self) -> None:
        """Refuse a folder whose `.git` the task removed or replaced; keep forge's own
        git dir forge's (its config and alternates put back, nothing git would read
        beside them, no link in it). A folder made by an older forge gets one."""
        if not taskgit.is_dir(self.path) or (self.strict and not is_contained(self.path)):
            raise Tampered(f"{self.path}/.git is gone or is not a directory any more")
        gd = self.git_dir
        if not taskgit.is_dir(gd):
            taskgit.remove(gd)
            self._adopt()
        for name in _NO_LINKS:
            if (gd / name).is_symlink():
                raise Tampered(f"{gd}/{name} (forge's git dir) was replaced by a link")
        for name in _NEVER:
            if os.path.lexists(gd / name):
                taskgit.remove(gd / name)
        _put(gd / "config", config_text(self.repo))
        _put(gd / "objects" / "info" / "alternates", f"{self.repo.common_dir / 'objects'}\n")
        self._guarded[:] = [True]

    def _adopt(self) -> None:
        """forge's git dir for a folder made before it had one: at the commit the
        folder's own `.git` has checked out, when the user's store has it."""
        head = taskgit.head(self.task_git)
        _init_dir(self.repo, self.git_dir)
        _put(self.git_dir / "config", config_text(self.repo))
        if head is None or not self._has_commit(head):
            taskgit.remove(self.git_dir)
            raise Tampered(f"{self.path}/.git names no commit forge can read")
        self._git(("update-ref", "--no-deref", "HEAD", head))
        self._git(("read-tree", head))

    def _has_commit(self, oid: str) -> bool:
        cp = self._git(("cat-file", "-e", f"{oid}^{{commit}}"), check=False)
        return cp.returncode == 0

    def detach_head(self) -> None:
        """Point forge's HEAD here at the commit it names, directly (what `update-ref
        --no-deref HEAD` writes, without a git process), then hand the task's `.git`
        over anew. Nothing to do when HEAD already names a commit."""
        text = (taskgit.read_file(self.git_dir / "HEAD") or b"").decode("ascii", "replace")
        if not text.startswith("ref: "):
            return
        head = taskgit.head(self.git_dir)
        if head is None:  # its branch is not a plain file: git resolves it
            cp = self._git(("rev-parse", "--verify", "--quiet", "HEAD"), check=False)
            if cp.returncode == 0 and cp.stdout.strip():
                self.run("update-ref", "--no-deref", "HEAD", cp.stdout.strip(), check=False)
            return
        self.owe()
        _put(self.git_dir / "HEAD", f"{head}\n")

    def point_head(self, oid: str) -> None:
        """forge's HEAD here (the branch it names, or HEAD itself when detached) at
        `oid`, written as `update-ref HEAD` would, without a git process: this git dir
        is forge's alone (guarded once an operation). The task's `.git` is owed."""
        self.owe()
        text = (taskgit.read_file(self.git_dir / "HEAD") or b"").decode("ascii", "replace")
        ref = text.strip().removeprefix("ref: ") if text.startswith("ref: ") else "HEAD"
        if ref == "HEAD" or (taskgit.safe_ref(ref) and ref.startswith("refs/heads/")):
            with contextlib.suppress(OSError):
                if ref == "HEAD" or os.path.isfile(self.git_dir / ref):
                    _put(self.git_dir / ref, f"{oid}\n")
                    return
        self._git(("update-ref", "HEAD", oid))  # a packed or unusual ref: git writes it

    @property
    def _owed(self) -> Path:
        return self.git_dir / OWED

    def owe(self) -> None:
        """Record that the task's `.git` no longer says what forge's git dir says."""
        if not os.path.lexists(self._owed):
            _put(self._owed, "")

    def owes(self) -> bool:
        """forge moved its HEAD or index since the task's `.git` was last put there:
        nothing of the task's has run here since, and its `.git` is out of date."""
        return os.path.lexists(self._owed)

    def settle(self) -> None:
        """Before a command of the task's runs here: its `.git` says what forge's does."""
        if self.owes():
            self.hand_over()

    def task_head(self) -> str | None:
        """The commit the task's own `.git` has checked out, read as files; None while
        forge owes it a new `.git` (what it names was forge's, and superseded)."""
        return None if self.owes() else taskgit.head(self.task_git)

    def head(self) -> str:
        """forge's own HEAD here (its files read; git asked only when they say nothing)."""
        mine = taskgit.head(self.git_dir)
        return mine or self._git(("rev-parse", "--verify", "HEAD")).stdout.strip()

    def base(self) -> str:
        """What forge's next commit here goes on: the commit the task's own git has
        checked out (its commits brought into the user's store first), or forge's own
        HEAD when the task's cannot be read or brought in."""
        mine = self.head()
        theirs = self.task_head()
        if theirs is None or theirs == mine:
            return mine
        return theirs if self.bring_back(theirs) else mine

    def bring_back(self, commit: str) -> bool:
        """Bring `commit` and what it needs from the task's own object store into the
        user's: its object files are copied into a folder of forge's, and `git fetch`
        takes them from there, checking each object (`fetch.fsckObjects`), so a task
        can plant no corrupt object in the user's store. False: it cannot be had."""
        if self._has_commit(commit):
            return True
        incoming = self.git_dir / "incoming"
        taskgit.remove(incoming)
        try:
            _init_dir(self.repo, incoming)
            _put(incoming / "config", config_text(self.repo))
            taskgit.copy_objects(self.task_git / "objects", incoming / "objects")
            got = proc.run(
                ["git", f"--git-dir={incoming}", *NO_HOOKS, "update-ref", IMPORT_REF, commit],
                cwd=self.path.parent,
                env=HARDENED,
                check=False,
            )
            if got.returncode != 0:
                return False
            fetched = proc.run(
                [
                    "git",
                    *NO_HOOKS,
                    "-c",
                    "fetch.fsckObjects=true",
                    "-c",
                    "gc.auto=0",
                    "-c",
                    "maintenance.auto=false",
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "--no-write-fetch-head",
                    "--no-recurse-submodules",
                    str(incoming),
                    IMPORT_REF,
                ],
                cwd=self.repo.root,
                env=HARDENED,
                check=False,
            )
            return fetched.returncode == 0 and self._has_commit(commit)
        finally:
            taskgit.remove(incoming)

    def hand_over(self) -> None:
        """Put a fresh `.git` in the folder for the task's own git commands: forge's
        HEAD (and its branch), index and config, alternates to the user's objects."""
        gd = self.git_dir
        head_text = (taskgit.read_file(gd / "HEAD") or b"").decode("ascii", "replace")
        branch = None
        ref = head_text.strip().removeprefix("ref: ") if head_text.startswith("ref: ") else ""
        if ref:
            oid = taskgit.head(gd)
            if oid is None:
                cp = self._git(("rev-parse", "--verify", "--quiet", "HEAD"), check=False)
                oid = cp.stdout.strip() if cp.returncode == 0 else None
            if oid:
                branch = (ref, oid)
        text = taskgit.GitDirText(
            head_text,
            branch,
            config=config_text(self.repo),
            alternates=f"{self.repo.common_dir / 'objects'}\n",
            index=gd / "index",
        )
        taskgit.replace(self.task_git, gd / "handover", text)
        taskgit.remove(self._owed)


IMPORT_REF = "refs/forge/incoming"  # in forge's folder of a task's objects
OWED = "forge-hand-over"  # in forge's git dir: the task's `.git` is to be put anew


def view_dir(path: Path) -> Path:
    return path.with_name(path.name + VIEW_SUFFIX)


def _init_dir(repo: Repository, git_dir: Path) -> None:
    """An empty git dir of forge's, written as git init would (no git called: no
    template, no sample hooks); its config is put by the caller."""
    git_dir.mkdir(parents=True)
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (git_dir / sub).mkdir(parents=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (git_dir / "config").write_text(config_text(repo))
    (git_dir / "objects" / "info" / "alternates").write_text(f"{repo.common_dir / 'objects'}\n")


def ceiling_env(path: Path) -> dict[str, str]:
    """For commands run in the slot or checkout at `path`: their git never climbs out
    of it into an enclosing repository (a task that removed its `.git`)."""
    mine = str(path.parent)
    have = os.environ.get("GIT_CEILING_DIRECTORIES")
    return {"GIT_CEILING_DIRECTORIES": f"{mine}:{have}" if have else mine}


def is_contained(path: Path) -> bool:
    git = path / ".git"
    return git.is_dir() and not git.is_symlink()


def create(
    repo: Repository, path: Path, *, commit: str, stop: threading.Event | None = None
) -> Contained:
    """A new contained repository at `path` (an empty or absent folder), detached at
    `commit` with its files checked out; forge's own git dir beside it made anew.
    `stop`: the checkout is killed when it is set (proc.Stopped; the caller removes
    the half-made folder)."""
    c = Contained(repo, path)
    taskgit.remove(c.git_dir)
    _init_dir(repo, c.git_dir)
    _put(c.git_dir / "config", config_text(repo))
    path.mkdir(parents=True, exist_ok=True)
    (path / ".git").mkdir(exist_ok=True)  # replaced by the hand-over (settle) below
    c.guard()
    c.owe()
    c._git(
        ("checkout", "--quiet", "--force", "--no-recurse-submodules", "--detach", commit),
        stop=stop,
    )
    c.settle()  # never left with an empty `.git`
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
        elif _FILTER.match(key):  # the user's own filters (git-lfs): what their commits use
            driver = section.split(".", 1)[1]
            lines += [f"[filter {_quote(driver)}]", f"\t{name} = {_quote(value)}"]
    text = "\n".join(lines) + "\n"
    with _lock:
        _configs[repo.common_dir] = text
    return text


def _copied_regexp() -> str:
    copied = "|".join(k.replace(".", "\\.") for k in _COPIED)
    return f"^({copied}|{_FILTER.pattern.strip('^$')})$"


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _put(path: Path, text: str) -> None:
    """Write `text` to `path` unless it already holds exactly that (a read is cheaper
    than a write, and this runs before every git call in the repository)."""
    if taskgit.read_file(path, limit=len(text) + 1) == text.encode():  # no FIFO, no link
        return
    tmp = path.with_name(f".{path.name}.forge-{os.getpid()}-{threading.get_ident()}")
    taskgit.remove(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def remove_view(path: Path) -> None:
    """Remove forge's own git dir of the folder `path`."""
    taskgit.remove(view_dir(path))
