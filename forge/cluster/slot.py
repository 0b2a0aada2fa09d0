"""A worker's slot: the place an attempt's steps run on a cluster worker
(forge.run.attempt.steps), contained as a local slot is.

The worker keeps, per remote, a bare mirror (forge's own: its config is forge's,
no hooks) and slots that are contained repositories borrowing the mirror's
objects (forge/git/contained.py): a task's `git config`, hooks, `commondir`,
attributes or links land in its slot's own `.git`, which forge's git never reads
nor writes through. forge works on the slot through its own git dir beside it,
under the hardened environment the local side uses; the task's commits come into
the mirror through a checking fetch. Slots are reused across attempts (setup runs
once per slot); one whose `.git` a task broke is made again (its work went back
with its result). Under `sandbox = true` each command runs under bubblewrap, the
slot and the worker's agent state its only writable folders.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from forge.base import proc, procgroup
from forge.base.sandbox import Sandbox
from forge.cluster.job import Job
from forge.frozen import frozen
from forge.git import merge as integrate
from forge.git import worktrees
from forge.git.contained import HARDENED, Contained
from forge.git.repo import Repository
from forge.run.attempt.confinement import run_contained
from forge.run.attempt.context import Command
from forge.run.state import events as ev
from forge.run.state.records import Phase
from forge.run.state.run_state import Attempt
from forge.run.state.store import record_attempt

CACHE_VAR = "FORGE_WORKER_CACHE"
WORKER_PID_VAR = "FORGE_WORKER_PID"


def cache_root() -> Path:
    where = os.environ.get(CACHE_VAR)
    return Path(where) if where else Path.home() / ".cache" / "forge" / "worker"


# Every git call a worker makes in its mirror: no hooks, no fsmonitor, no attributes
# or config but forge's (a task outside the sandbox may write the mirror's config:
# it is written again before each use, see own_config).
_MIRROR_FLAGS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "submodule.recurse=false",
)


# The remote may be a path or any URL the user's git reaches: every protocol stays.
_ENV = {k: v for k, v in HARDENED.items() if k != "GIT_PROTOCOL_FROM_USER"}


def git(*args: str, cwd: Path) -> str:
    """A git command in the mirror (forge's own repository: never in a slot)."""
    return proc.run(["git", *_MIRROR_FLAGS, *args], cwd=cwd, env=_ENV).stdout


def own_config(mirror: Path, oid: str) -> None:
    """The mirror's config is forge's (whatever a task wrote there): a bare
    repository of the object format of `oid`, without hooks."""
    sha256 = len(oid) == 64
    text = (
        f"[core]\n\trepositoryformatversion = {int(sha256)}\n\tfilemode = true\n"
        "\tbare = true\n\thooksPath = /dev/null\n"
        + ("[extensions]\n\tobjectformat = sha256\n" if sha256 else "")
    )
    config = mirror / "config"
    with contextlib.suppress(OSError):
        if config.read_text() == text and not config.is_symlink():
            return
    fresh = mirror / f"config.forge-{os.getpid()}"
    fresh.write_text(text)
    os.replace(fresh, config)
    for name in ("commondir", "info/attributes"):  # read by git beside config
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            (mirror / name).unlink()


def mirror_repo(mirror: Path) -> Repository:
    """The mirror as the repository whose objects the slots borrow."""
    return Repository(root=mirror, common_dir=mirror, main_root=mirror)


@frozen
class SlotDir:
    home: Path  # this remote's folder of the worker's cache
    repo: Repository  # the mirror
    path: Path  # the slot's working tree

    @property
    def branch(self) -> str:
        """The mirror's ref of the slot's last commit."""
        return f"refs/forge/worker/{self.path.name}"


@contextlib.contextmanager
def slot(job: Job) -> Iterator[SlotDir]:
    """A free slot of this machine's cache for `job`'s remote, its mirror up to date."""
    from filelock import FileLock, Timeout

    home = cache_root() / hashlib.sha256(job.remote.encode()).hexdigest()[:16]
    home.mkdir(parents=True, exist_ok=True)
    mirror = home / "mirror.git"
    with FileLock(str(home / "mirror.lock")):
        if not (mirror / "HEAD").exists():
            git("clone", "--quiet", "--bare", "--no-tags", job.remote, str(mirror), cwd=home)
        own_config(mirror, job.start)
        have = proc.run(
            ["git", *_MIRROR_FLAGS, "cat-file", "-e", f"{job.start}^{{commit}}"],
            cwd=mirror,
            env=_ENV,
            check=False,
        )
        if have.returncode != 0:  # most starts are new integration heads; some are known
            ref = f"+{job.job_ref}:{job.job_ref}"
            git("fetch", "--quiet", "--no-tags", job.remote, ref, cwd=mirror)
    repo = mirror_repo(mirror)
    n = 0
    while True:
        lock = FileLock(str(home / f"slot-{n}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            n += 1
            continue
        try:
            path = home / "slots" / f"slot-{n}"
            _ready(repo, path, job.start, mirror_lock=home / "mirror.lock")
            yield SlotDir(home, repo, path)
        finally:
            lock.release()
        return


def _ready(repo: Repository, path: Path, start: str, *, mirror_lock: Path) -> None:
    """A contained repository at `path`: made when there is none, made again when a
    task broke its `.git` or it is a linked worktree of an older forge."""
    from filelock import FileLock

    if path.exists() and worktrees.usable(repo, path) is not None:
        with FileLock(str(mirror_lock)):  # an older slot's removal prunes the mirror
            worktrees.remove(repo, path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        worktrees.add(repo, path, start, what="worker slot")


class WorkerSlot:
    """A slot of this machine's cache as the place an attempt's steps run."""

    def __init__(self, job: Job, where: SlotDir, stop: threading.Event) -> None:
        self.job, self.where, self.stop = job, where, stop
        self.slot = where.path
        self.repo = where.repo
        self.logs = where.home / "logs" / job.key.replace("/", "_")
        self.logs.mkdir(parents=True, exist_ok=True)
        self.state_dir = where.home / "agent-state"
        self.sandboxed = job.sandbox
        self.warnings: list[str] = []
        self.phases: list[Phase] = []
        self.attempt: Attempt | None = None  # the record the steps fill in, sent back

    def start(self) -> None:
        """The slot at the job's start, nothing in its tree but ignored files (all
        gone under `clean = "all"`)."""
        own = Contained(self.repo, self.slot)
        own.run(
            "checkout", "--quiet", "--force", "--no-recurse-submodules", "--detach", self.job.start
        )
        own.run("clean", "-fdqx" if self.job.order.clean_all else "-fdq")

    def push(self, commit: str) -> None:
        """`commit` to the job's result ref, from the mirror (which holds its objects)."""
        ref = f"{commit}:{self.job.result_ref}"
        own_config(self.repo.common_dir, commit)
        git(
            "push",
            "--quiet",
            "--force",
            "--no-verify",
            self.job.remote,
            ref,
            cwd=self.repo.common_dir,
        )

    def sandbox(self, writable: tuple[Path, ...], network: bool = True) -> Sandbox | None:
        if not self.job.sandbox:
            return None
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # The mirror, the logs and forge's git dirs of the slots: read, never written
        # (mounted after the agents' ~/.cache, which holds them: see Sandbox.wrap).
        return Sandbox(
            writable=(self.slot, self.state_dir, *writable),
            readable=(self.where.home,),
            network=network,
            sockets=self.job.order.sockets,
            host_ports=self.job.order.host_ports,
        )

    # -- the Place of the attempt's steps -----------------------------------------

    def group(self, command: Command) -> procgroup.GroupResult:
        c, job = command, self.job
        # Tagged with this worker's pid too: a worker that dies leaves its processes
        # to the next attempt's sweep (forge.cluster.worker.sweep_orphans).
        env = {**c.env, WORKER_PID_VAR: str(os.getpid())}
        stop = self.stop if c.stop is None else c.stop
        spec = procgroup.GroupSpec(
            c.argv,
            cwd=self.slot,
            log_path=c.log,
            env=env,
            timeout=c.timeout,
            grace=job.grace,
            tag=job.tag,
            input_path=c.input_path,
            cap=job.log_cap,
            sandbox=self.sandbox(c.writable, c.network),
        )
        res = run_contained(self.repo, spec, stop=stop)
        if res.left:  # as a local slot says it (forge.run.attempt.local)
            self.warn(f"{c.log.stem} left processes running, stopped: {', '.join(res.left)}")
        return res

    @contextlib.contextmanager
    def phase(self, name: str, *, save: bool = False) -> Iterator[object]:
        """Recorded here and sent back with the result (the coordinator's record)."""
        del save
        entry = Phase.begin(name)
        self.phases.append(entry)
        try:
            yield entry
        finally:
            entry.close()

    def set_up(self) -> None:
        pass  # the setup's marker in forge's git dir of the slot says it

    def commit(self, message: str) -> str:
        return worktrees.commit_all(
            self.repo, self.slot, message, branch=self.where.branch, identity=self.job.identity
        )

    def shares_history(self, base: str, head: str) -> bool:
        return integrate.shares_history(self.repo, base, head)

    def changed(self, base: str, head: str) -> list[str]:
        return integrate.changed(self.repo, base, head)

    def tree(self, commit: str) -> str:
        return self.repo.tree_of(commit)

    def restore(self, commit: str | None = None) -> None:
        worktrees.restore(self.repo, self.slot, commit)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def saved(self) -> None:
        pass  # the record goes back with the result

    def record(self, event: ev.Event) -> None:
        assert self.attempt is not None
        record_attempt(self.attempt, event)
