"""One attempt on a cluster worker: what `run_job` does where Dask runs it.

The worker gets the repository through git, never a shared file system: a bare
mirror of the coordinator's remote in its cache, and slots that are worktrees of
that mirror, reused across attempts as local slots are (setup runs once per slot
and again when the setup command changes). The attempt's steps are a local
attempt's (forge.run.attempt.steps: setup, the agent or command, the commit, the
scope and progress checks, the task's check), in process groups stopped with
TERM, grace, KILL. The work is pushed to a result ref of its own; the
coordinator fetches it and merges.

A worker that dies mid-attempt leaves its processes in sessions of their own: the
next attempt on that machine stops every process tagged with a worker pid that is
no longer alive. A job that Dask runs a second time after its worker died answers
INFRA at once (its claim shows the earlier run), so the coordinator decides where
it runs again and no attempt is spent.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from forge.base import logs, proc, procgroup
from forge.cluster.job import Job, JobResult
from forge.run.attempt import messages
from forge.run.attempt.confinement import run_contained
from forge.run.attempt.context import Command, Outcome
from forge.run.attempt.steps import run_steps
from forge.run.state.run_state import UNCOUNTED, Attempt, Status

CACHE_VAR = "FORGE_WORKER_CACHE"
WORKER_PID_VAR = "FORGE_WORKER_PID"
LOG_TAIL = 256 * 1024  # bytes of each log sent back to the coordinator
STOP_POLL = 0.2


def cache_root() -> Path:
    where = os.environ.get(CACHE_VAR)
    return Path(where) if where else Path.home() / ".cache" / "forge" / "worker"


def run_job(job: Job) -> JobResult:
    """The function Dask runs on a worker. Never raises for the task's own failures."""
    where = _where()
    lost = _claim(job, where)
    if lost is not None:
        return lost_worker(lost)
    sweep_orphans()
    stop = threading.Event()
    done = threading.Event()
    watcher = threading.Thread(target=_watch_stop, args=(job.stop_event, stop, done), daemon=True)
    watcher.start()
    try:
        with _slot(job) as slot:
            place = _WorkerSlot(job, slot, stop, where)
            try:
                return place.run()
            finally:  # the logs went back with the result
                shutil.rmtree(place.logs, ignore_errors=True)
    finally:
        done.set()


def _where() -> str:
    try:
        from distributed import get_worker

        return f"{socket.gethostname()} {get_worker().address}"
    except (ImportError, ValueError):
        return socket.gethostname()


def lost_worker(where: str | None) -> JobResult:
    """The result of an attempt whose worker died under it: named by where it ran."""
    who = f"worker {where.split()[-1]}" if where else "worker"
    outcome = Outcome(
        Status.INFRA, messages.lost(who), infra_kind="worker-lost", infra_retry_after=0.0
    )
    return JobResult(outcome, where=where or "")


def _claim(job: Job, where: str) -> str | None:
    """None when this worker is the first to start the job; else where the job
    started before (a worker that then died)."""
    try:
        from distributed import Variable, get_client

        client = get_client()
    except (ImportError, ValueError):  # not on a worker (called directly)
        return None
    claim = Variable(f"forge-claim-{job.key}", client=client)
    try:
        return str(claim.get(timeout=0))
    except TimeoutError:
        claim.set(where)
        return None


def _watch_stop(name: str, stop: threading.Event, done: threading.Event) -> None:
    """Set `stop` when the coordinator says so, or when the scheduler is gone: then
    the attempt's result could never be delivered, and its processes must not
    outlive the run."""
    try:
        from distributed import Event, get_client

        client = get_client()
    except (ImportError, ValueError):  # not on a worker (called directly)
        return
    try:
        event = Event(name, client=client)
        while not done.is_set():
            if event.wait(timeout=STOP_POLL):
                stop.set()
                return
    except Exception:  # noqa: BLE001 any failure to ask means the scheduler is gone
        if not done.is_set():
            stop.set()


def sweep_orphans() -> list[int]:
    """Stop the process groups that a worker which died left running on this machine."""
    needle = f"{WORKER_PID_VAR}=".encode()
    stopped: list[int] = []
    for pid in _pids():
        owner = _environ_value(pid, needle)
        if owner is None or _alive(owner):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            pgid = os.getpgid(pid)
            procgroup.stop_group(pgid, grace=0.5)
            stopped.append(pgid)
    return stopped


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _environ_value(pid: int, needle: bytes) -> int | None:
    try:
        data = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in data.split(b"\0"):
        if item.startswith(needle):
            value = item[len(needle) :]
            return int(value) if value.isdigit() else None
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _git(*args: str, cwd: Path, env: dict[str, str] | None = None, check: bool = True) -> str:
    return proc.run(["git", *args], cwd=cwd, env=env, check=check).stdout


@contextlib.contextmanager
def _slot(job: Job) -> Iterator[Path]:
    """A free slot of this machine's cache for `job`'s remote, its mirror up to date."""
    from filelock import FileLock, Timeout

    home = cache_root() / hashlib.sha256(job.remote.encode()).hexdigest()[:16]
    home.mkdir(parents=True, exist_ok=True)
    mirror = home / "mirror.git"
    with FileLock(str(home / "mirror.lock")):
        if not (mirror / "HEAD").exists():
            _git("clone", "--quiet", "--bare", "--no-tags", job.remote, str(mirror), cwd=home)
            _git("config", "core.hooksPath", os.devnull, cwd=mirror)
        have = proc.run(
            ["git", "cat-file", "-e", f"{job.start}^{{commit}}"], cwd=mirror, check=False
        )
        if have.returncode != 0:  # most starts are new integration heads; some are known
            ref = f"+{job.job_ref}:{job.job_ref}"
            _git("fetch", "--quiet", "--no-tags", job.remote, ref, cwd=mirror)
    n = 0
    while True:
        lock = FileLock(str(home / f"slot-{n}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            n += 1
            continue
        try:
            slot = home / "slots" / f"slot-{n}"
            if not (slot / ".git").exists():
                slot.parent.mkdir(parents=True, exist_ok=True)
                # Under the mirror's lock: a prune removes the mirror's empty
                # `worktrees` folder while another worker adds its first slot.
                with FileLock(str(home / "mirror.lock")):
                    _git("worktree", "prune", cwd=mirror)
                    add = ("worktree", "add", "--quiet", "--detach", str(slot), job.start)
                    _git(*add, cwd=mirror)
            yield slot
        finally:
            lock.release()
        return


class _WorkerSlot:
    """A slot of this machine's cache as the place an attempt's steps run
    (forge.run.attempt.steps): a detached worktree of the mirror, its commits made
    with plumbing (no hooks: the mirror has none) and pushed back to the result ref."""

    def __init__(self, job: Job, slot: Path, stop: threading.Event, where: str) -> None:
        self.job, self.slot, self.stop, self.where = job, slot, stop, where
        self.logs = slot.parent.parent / "logs" / job.key.replace("/", "_")
        self.logs.mkdir(parents=True, exist_ok=True)
        self.state_dir = slot.parent.parent / "agent-state"
        self.warnings: list[str] = []

    def run(self) -> JobResult:
        job, order = self.job, self.job.order
        _git("checkout", "--quiet", "--force", "--detach", job.start, cwd=self.slot)
        _git("clean", "-fdqx" if order.clean_all else "-fdq", cwd=self.slot)
        model = order.agent[1].model if order.agent is not None else None
        attempt = Attempt(number=order.number, agent="", model=model, tag=job.tag)
        done = run_steps(order, self, attempt, job.start)
        outcome = done if isinstance(done, Outcome) else None
        commit = attempt.commit
        if outcome is not None and outcome.status in UNCOUNTED:
            # Void work goes back too: the coordinator keeps it, named, built upon by nobody.
            void = self.commit(order.message)
            commit = void if void != job.start else None
        if commit is not None:
            remote, ref = job.remote, f"{commit}:{job.result_ref}"
            _git("push", "--quiet", "--force", remote, ref, cwd=self.slot)
        tails = {p.name: logs.tail(p, LOG_TAIL) for p in sorted(self.logs.iterdir())}
        return JobResult(
            outcome,
            where=self.where,
            commit=commit,
            diff_hash=attempt.diff_hash,
            feedback_source=attempt.feedback_source,
            cost_usd=attempt.cost_usd,
            input_tokens=attempt.input_tokens,
            output_tokens=attempt.output_tokens,
            models=tuple(attempt.models or ()),
            model_mismatch=attempt.model_mismatch,
            warnings=tuple(self.warnings),
            logs={name: text for name, text in tails.items() if name.endswith(".log")},
            log=Path(attempt.log).name if attempt.log else None,
        )

    # -- the Place of the attempt's steps -----------------------------------------

    def group(self, command: Command) -> procgroup.GroupResult:
        c, job = command, self.job
        # Tagged with this worker's pid too: a worker that dies leaves its processes
        # to the next attempt's sweep (sweep_orphans).
        env = {**c.env, WORKER_PID_VAR: str(os.getpid())}
        stop = self.stop if c.stop is None else c.stop
        return run_contained(
            c.argv,
            cwd=self.slot,
            log=c.log,
            env=env,
            timeout=c.timeout,
            grace=job.grace,
            tag=job.tag,
            cap=job.log_cap,
            stop=stop,
            input_path=c.input_path,
        )

    def phase(self, name: str, *, save: bool = False) -> contextlib.AbstractContextManager[object]:
        del name, save  # the coordinator records the attempt's phases
        return contextlib.nullcontext()

    def set_up(self) -> None:
        pass  # the setup's marker in the slot says it

    def commit(self, message: str) -> str:
        slot = self.slot
        _git("add", "--all", cwd=slot)
        tree = _git("write-tree", cwd=slot).strip()
        head = _git("rev-parse", "HEAD", cwd=slot).strip()
        if tree == self.tree(head):
            return head
        env = proc.clean_env(self.job.identity)
        commit = _git("commit-tree", tree, "-p", head, "-m", message, cwd=slot, env=env).strip()
        _git("update-ref", "--no-deref", "HEAD", commit, head, cwd=slot)
        return commit

    def shares_history(self, base: str, head: str) -> bool:
        found = proc.run(["git", "merge-base", base, head], cwd=self.slot, check=False)
        return found.returncode == 0

    def changed(self, base: str, head: str) -> list[str]:
        names = _git("diff", "--name-only", "-z", "--no-renames", base, head, cwd=self.slot)
        return [p for p in names.split("\0") if p]

    def tree(self, commit: str) -> str:
        return _git("rev-parse", f"{commit}^{{tree}}", cwd=self.slot).strip()

    def restore(self) -> None:
        _git("reset", "--quiet", "--hard", cwd=self.slot, check=False)
        _git("clean", "-fdq", cwd=self.slot, check=False)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def saved(self) -> None:
        pass  # the record goes back with the result
