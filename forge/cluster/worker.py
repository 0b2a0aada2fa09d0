"""One attempt on a cluster worker: what `run_job` does where Dask runs it.

The worker gets the repository through git, never a shared file system: a bare
mirror of the coordinator's remote in its cache, and slots that are worktrees of
that mirror, reused across attempts as local slots are (setup runs once per slot
and again when the setup command changes). Setup, the agent or command, the
commit, the scope check and the task's check run as in a local attempt, in
process groups stopped with TERM, grace, KILL. The work is pushed to a result ref
of its own; the coordinator fetches it and merges.

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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from forge.base import logs, proc
from forge.cluster.job import Job, JobResult
from forge.git.contained import ceiling_env
from forge.run.attempt.reason import reason_line
from forge.run.state.run_state import Stall, Status
from forge.verify import environment

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
        with _slot(job) as (slot, mirror):
            attempt = _Attempt(job, slot, mirror, stop, where)
            try:
                return attempt.run()
            finally:  # the logs went back with the result
                shutil.rmtree(attempt.logs, ignore_errors=True)
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
    return JobResult(
        Status.INFRA,
        f"{who} lost mid-attempt: the attempt runs again elsewhere",
        where=where or "",
        infra_kind="worker-lost",
        infra_retry_after=0.0,
    )


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
            proc.stop_group(pgid, grace=0.5)
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
def _slot(job: Job) -> Iterator[tuple[Path, Path]]:
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
                _git("worktree", "prune", cwd=mirror)
                _git("worktree", "add", "--quiet", "--detach", str(slot), job.start, cwd=mirror)
            yield slot, mirror
        finally:
            lock.release()
        return


class _Attempt:
    def __init__(
        self, job: Job, slot: Path, mirror: Path, stop: threading.Event, where: str
    ) -> None:
        self.job, self.slot, self.mirror, self.stop, self.where = job, slot, mirror, stop, where
        self.logs = slot.parent.parent / "logs" / job.key.replace("/", "_")
        self.logs.mkdir(parents=True, exist_ok=True)
        self.usage: Any = None
        self.work_started = time.monotonic()

    def run(self) -> JobResult:
        job, slot = self.job, self.slot
        _git("checkout", "--quiet", "--force", "--detach", job.start, cwd=slot)
        _git("clean", "-fdqx" if job.clean_all else "-fdq", cwd=slot)
        failed = self._setup() or self._work()
        if failed is not None:
            return self._end(failed, commit=self._commit())
        head = self._commit()
        if head is None:
            return self._end(
                JobResult(Status.FAILED, "no changes", stall=Stall.NO_CHANGES), commit=None
            )
        changed = _git("diff", "--name-only", "-z", "--no-renames", job.base, head, cwd=slot)
        paths = [p for p in changed.split("\0") if p]
        if not paths:
            reason = "no changes (the work adds up to nothing against the base)"
            return self._end(JobResult(Status.FAILED, reason, stall=Stall.NO_CHANGES), commit=head)
        from forge.plan.patterns import out_of_scope

        warnings: tuple[str, ...] = ()
        outside = out_of_scope(job.files, paths)
        if outside:
            msg = f"changed files outside its declared files: {', '.join(outside[:8])}"
            if not job.scope_warn:
                return self._end(JobResult(Status.FAILED, msg, feedback_source="scope"), head)
            warnings = (msg,)
        if job.judged_hash and job.judged_hash == self._diff_hash(head):
            reason = "no progress: the same change as the last failed attempt"
            return self._end(JobResult(Status.FAILED, reason, stall=Stall.NO_PROGRESS), commit=head)
        checked = self._check()
        if checked is not None:
            return self._end(checked, commit=head)
        return self._end(JobResult(Status.MERGED, warnings=warnings), commit=head)

    # -- steps -----------------------------------------------------------------

    def _group(self, argv: list[str] | str, log: str, timeout: float | None, **kw: Any) -> Any:
        # As in a local slot: the plan's env for this worktree, git kept from climbing
        # out of it, the log capped.
        env = {
            **environment.expand(self.job.env, self.slot),
            **ceiling_env(self.slot),
            **dict(kw.pop("env", None) or {}),
            WORKER_PID_VAR: str(os.getpid()),
        }
        return proc.run_group(
            proc.GroupSpec(
                argv,
                cwd=self.slot,
                log_path=self.logs / log,
                env=env,
                timeout=timeout,
                grace=self.job.grace,
                tag=self.job.tag,
                cap=self.job.log_cap,
                **kw,
            ),
            stop=self.stop,
        )

    def _setup(self) -> JobResult | None:
        job = self.job
        if not job.setup:
            return None
        # Once per slot, and again when the setup or env changed (as locally).
        digest = environment.setup_hash(job.setup, job.env)
        if not job.clean_all and environment.is_set_up(self.slot, digest):
            return None
        res = self._group(job.setup, "setup.log", job.setup_timeout)
        if res.stopped:
            return JobResult(Status.INTERRUPTED, "stopped during setup")
        if res.timed_out:
            limit = f"{job.setup_timeout:g}s" if job.setup_timeout else "its time"
            reason = f"setup timed out after {limit} (setup_timeout)"
            return JobResult(Status.TIMEOUT, reason, log="setup.log")
        if res.returncode != 0:
            return JobResult(
                Status.FAILED, f"setup failed: {self._last_line('setup.log')}", log="setup.log"
            )
        environment.mark_set_up(self.slot, digest)
        return None

    def _work(self) -> JobResult | None:
        job = self.job
        self.work_started = time.monotonic()
        if job.agent is None:
            assert job.run is not None
            res = self._group(job.run, "agent.log", job.timeout)
            defn = None
        else:
            defn, res = self._agent()
            if isinstance(res, JobResult):
                return res
        if defn is not None and not res.stopped:
            # Read after a timeout too: a CLI that waits out an outage looks slow.
            found = self._read_agent(defn, None if res.timed_out else res.returncode)
            if found is not None:
                return found
        if res.stopped:
            return JobResult(Status.INTERRUPTED, "stopped by the user", log="agent.log")
        if res.timed_out:
            return JobResult(Status.TIMEOUT, f"timed out after {job.timeout:g}s", log="agent.log")
        if res.returncode != 0:
            said = self._last_line("agent.log")
            if defn is not None:
                from forge.agents import spec as agents

                said = agents.failure_reason(self._text("agent.log")) or said
            what = "command" if defn is None else "agent"
            reason = f"{what} exited {res.returncode}: {said}"
            return JobResult(Status.FAILED, reason, feedback_source="agent", log="agent.log")
        return None

    def _agent(self) -> tuple[Any, Any]:
        from forge.agents import spec as agents

        assert self.job.agent is not None
        defn, spec = self.job.agent
        missing = agents.check_binary(defn)
        if missing:
            kind = "binary-missing"
            return defn, JobResult(Status.INFRA, f"{kind}: {missing}", infra_kind=kind)
        prompt = self.logs / "prompt.md"
        prompt.write_text(self.job.prompt_text)
        feedback = None
        if self.job.feedback_text is not None:
            feedback = self.logs / "feedback.md"
            feedback.write_text(self.job.feedback_text)
        argv, stdin = agents.render_command(
            defn, spec, prompt_file=prompt, task=self.job.task, worktree=self.slot
        )
        env = agents.agent_env(
            defn,
            spec,
            task=self.job.task,
            attempt=self.job.attempt,
            prompt_file=prompt,
            feedback_file=feedback,
            state_dir=self.slot.parent.parent / "agent-state",
            worktree=self.slot,
        )
        return defn, self._group(argv, "agent.log", self.job.timeout, env=env, input_path=stdin)

    def _read_agent(self, defn: Any, returncode: int | None) -> JobResult | None:
        from forge.agents import spec as agents
        from forge.run.attempt.work import drop_ignored

        output = self._text("agent.log")
        self.usage = agents.parse_usage(defn, output)
        # Before any return: a CLI's cache (aider's tags) is never the task's work.
        drop_ignored(self.slot, defn.ignore_paths)
        infra = agents.classify_failure(defn, returncode=returncode, output=output)
        if infra is not None:
            return JobResult(
                Status.INFRA,
                f"{infra.kind}: {infra.message}",
                infra_kind=infra.kind,
                infra_retry_after=infra.retry_after,
                log="agent.log",
            )
        if returncode not in (0, None) and agents.is_context_overflow(output):
            reason = "the prompt overflowed the agent's context window: split the task"
            return JobResult(Status.FAILED, reason, log="agent.log")
        return None

    def _check(self) -> JobResult | None:
        job = self.job
        if not job.check:
            return None
        # The attempt's timeout covers the check: it gets what the work left.
        left = job.timeout - (time.monotonic() - self.work_started)
        if left <= 0:
            reason = f"check not run: the attempt's {job.timeout:g}s timeout was used up"
            return JobResult(Status.TIMEOUT, reason, feedback_source="check")
        res = self._group(job.check, "check.log", left)
        _git("reset", "--quiet", "--hard", cwd=self.slot)
        _git("clean", "-fdq", cwd=self.slot)
        if res.stopped:
            return JobResult(Status.INTERRUPTED, "stopped during the check")
        if res.timed_out:
            reason = f"check timed out (the attempt's {job.timeout:g}s timeout includes the check)"
            return JobResult(Status.TIMEOUT, reason, feedback_source="check", log="check.log")
        if res.returncode != 0:
            reason = f"check failed: {self._last_line('check.log')}"
            return JobResult(Status.FAILED, reason, feedback_source="check", log="check.log")
        return None

    # -- results ---------------------------------------------------------------

    def _commit(self) -> str | None:
        """Commit what the slot holds (hooks never run: the mirror has none) and
        return it, or None when the attempt changed nothing."""
        slot, job = self.slot, self.job
        _git("add", "--all", cwd=slot)
        tree = _git("write-tree", cwd=slot).strip()
        head = _git("rev-parse", "HEAD", cwd=slot).strip()
        if tree == _git("rev-parse", f"{head}^{{tree}}", cwd=slot).strip():
            return None if head == job.start else head
        env = proc.clean_env(job.identity)
        commit = _git("commit-tree", tree, "-p", head, "-m", job.message, cwd=slot, env=env)
        commit = commit.strip()
        _git("update-ref", "--no-deref", "HEAD", commit, head, cwd=slot)
        return commit

    def _diff_hash(self, head: str) -> str:
        from forge.run.attempt.pipeline import change_hash

        tree = _git("rev-parse", f"{head}^{{tree}}", cwd=self.slot).strip()
        return change_hash(self.job.base, tree)

    def _end(self, result: JobResult, commit: str | None) -> JobResult:
        if commit is not None:
            _git(
                "push",
                "--quiet",
                "--force",
                self.job.remote,
                f"{commit}:{self.job.result_ref}",
                cwd=self.slot,
            )
        usage = self.usage
        tails = {
            p.name: logs.tail(p, LOG_TAIL)
            for p in sorted(self.logs.iterdir())
            if p.suffix == ".log"
        }
        return JobResult(
            result.status,
            result.reason,
            where=self.where,
            commit=commit,
            diff_hash=self._diff_hash(commit) if commit else None,
            feedback_source=result.feedback_source,
            cost_usd=getattr(usage, "cost_usd", None),
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
            infra_kind=result.infra_kind,
            infra_retry_after=result.infra_retry_after,
            warnings=result.warnings,
            logs=tails,
            log=result.log,
        )

    def _text(self, name: str) -> str:
        """What an agent's output is searched in (usage, provider errors), as locally."""
        return logs.tail(self.logs / name, logs.ANALYSIS_BYTES)

    def _last_line(self, name: str) -> str:
        """A failure's meaningful line, read as a local attempt reads it."""
        return reason_line(logs.tail(self.logs / name))
