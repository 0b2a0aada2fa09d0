"""The coordinator's side of a cluster run: attempts go to Dask workers, everything
else stays here.

Run state, holds, dispatch, merges, the gate and the verification stay in the
`forge run` process and stay authoritative. For each attempt the coordinator
publishes the commit the attempt starts from to the cluster's git remote (a ref
of forge's own), submits `worker.run_job`, and waits while watching Ctrl-C and
the scheduler. The worker pushes its work to the attempt's result ref; the
coordinator fetches exactly that ref, for exactly the attempt it waits on, so a
result pushed for an attempt it gave up is never read, and puts it on the task
branch. Merging is the local path's.

`--cluster local:N` starts a LocalCluster of N worker processes on this machine
and a bare repository (borrowing this repository's objects) as its remote, both
removed at the end of the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from forge.cluster.address import is_this_machine, parse_address, remote_needed
from forge.cluster.job import Job, JobResult
from forge.cluster.slot import CACHE_VAR
from forge.cluster.worker import lost_worker
from forge.errors import ExitCode, ForgeError
from forge.frozen import frozen
from forge.git import worktrees
from forge.git.repo import Repository
from forge.plan.model import Plan
from forge.plan.repo_config import RepoConfig
from forge.run.attempt import messages
from forge.run.attempt.context import AttemptScope, Outcome
from forge.run.attempt.order import order_for
from forge.run.attempt.reset import Start, reset_for_attempt
from forge.run.context import RunContext
from forge.run.state import events as ev
from forge.run.state.run_state import UNCOUNTED, Status

INSTALL_HINT = "the cluster needs Dask distributed and cryptography: pip install 'forge[cluster]'"
LOST_AFTER = 10.0  # seconds without the scheduler before the run pauses
LOCAL_CACHE = ".cluster"  # folder of local:N workers' caches, under the plan's slots
STOP_WAIT = 60.0  # after a stop, how long to wait for workers to report back

# Dask ships no types (mypy skips it, pyproject.toml): a Client, LocalCluster or
# Security is held as the untyped object it is.
DaskObject = Any


@frozen
class ClusterConfig:
    address: str  # tcp://host:8786, or local:N
    remote: str | None = None  # a git URL or path the workers reach
    tls: tuple[str, str, str] | None = None  # CA, certificate, key: a tls:// scheduler
    insecure: bool = False  # a scheduler reached without TLS is accepted


def require_dask() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ForgeError(INSTALL_HINT, code=ExitCode.USAGE) from None


class Cluster:
    """One run's connection to a Dask cluster and the git remote its workers use."""

    def __init__(self, repo: Repository, plan: str, config: ClusterConfig) -> None:
        self.repo = repo
        self.plan = plan
        self.config = config
        self.nonce = uuid.uuid4().hex[:12]
        self.stop_name = f"forge-stop-{self.nonce}"
        self.local_n = parse_address(config.address)
        self.client: DaskObject = None
        self.cluster: DaskObject = None
        self.bare: Path | None = None
        self.remote = config.remote or ""
        self.lost: str | None = None  # why the scheduler is gone, once it is
        self.published: list[str] = []  # refs this run made on a remote of the user's

    # -- lifetime ----------------------------------------------------------------

    def open(self) -> None:
        require_dask()
        from distributed import Client, Event, LocalCluster

        # Dask logs its reconnection attempts with tracebacks; forge says what
        # happened itself, in one line.
        logging.getLogger("distributed").setLevel(logging.CRITICAL)

        if self.local_n is not None:
            # The workers must not die of the terminal's Ctrl-C (it reaches the whole
            # foreground process group): forge stops their attempts itself. An
            # ignored signal stays ignored across exec.
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
            # Only this run holds the certificate: a task that reaches the scheduler
            # (it listens on 127.0.0.1) cannot make a client of it.
            security = local_security()
            try:
                self.cluster = LocalCluster(
                    protocol="tls://",
                    security=security,
                    n_workers=self.local_n,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=50,
                    # The workers' mirror and slots live with the plan's own slots,
                    # reused run after run, and `forge clean` removes them.
                    env={CACHE_VAR: str(local_cache(self.repo, self.plan))},
                )
            finally:
                signal.signal(signal.SIGINT, old)
            self.client = Client(self.cluster, security=security, set_as_default=False)
        else:
            try:
                self.client = Client(
                    self.config.address,
                    timeout=10,
                    set_as_default=False,
                    security=remote_security(self.config),
                )
            except (OSError, TimeoutError) as exc:
                raise ForgeError(
                    f"cannot reach the cluster scheduler at {self.config.address}: {exc}",
                    code=ExitCode.PAUSED,
                ) from None
        Event(self.stop_name, client=self.client).clear()
        self._register_sweeper()
        if not self.remote:
            self.bare = self._make_bare()
            self.remote = str(self.bare)

    def _register_sweeper(self) -> None:
        """Each worker, and each one started later (a restart after a death), stops
        what a dead worker left running on its machine."""
        from forge.cluster.sweeper import Sweeper

        with contextlib.suppress(Exception):  # an older scheduler: the per-job sweep remains
            self.client.register_plugin(Sweeper())

    def close(self) -> None:
        if self.published and self.bare is None:  # leave the user's remote as it was
            gone = [f":{ref}" for ref in self.published]
            self.repo.try_git("push", "--quiet", "--no-verify", self.remote, *gone)
        for thing in (self.client, self.cluster):
            if thing is not None:
                with contextlib.suppress(Exception):
                    thing.close()
        if self.bare is not None:
            shutil.rmtree(self.bare, ignore_errors=True)

    def stop_all(self) -> None:
        """Tell every worker to stop this run's attempts (TERM, grace, KILL there)."""
        from distributed import Event

        with contextlib.suppress(Exception):
            Event(self.stop_name, client=self.client).set()

    def _make_bare(self) -> Path:
        """A bare repository for `local:N` that borrows this repository's objects, so
        publishing a commit is an update-ref, not a copy. Its path is the same every
        run of the plan (one runner per plan), so the workers' mirrors are reused."""
        bare = self.repo.state.root / "cluster" / f"{self.plan}.git"
        shutil.rmtree(bare, ignore_errors=True)  # left by a run that was killed
        bare.parent.mkdir(parents=True, exist_ok=True)
        self.repo.git("init", "--quiet", "--bare", str(bare))
        objects = self.repo.common_dir / "objects"
        (bare / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        return bare

    # -- git -------------------------------------------------------------------

    def publish(self, commit: str, ref: str) -> None:
        if self.bare is not None:
            self.repo.git(f"--git-dir={self.bare}", "update-ref", ref, commit)
        else:
            self.repo.git(
                "push", "--quiet", "--force", "--no-verify", self.remote, f"{commit}:{ref}"
            )
            self.published += [ref, ref.replace("refs/forge/jobs/", "refs/forge/results/", 1)]

    def fetch(self, ref: str) -> str:
        self.repo.git(
            "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", self.remote, f"+{ref}:{ref}"
        )
        commit = self.repo.git("rev-parse", "--verify", f"{ref}^{{commit}}").strip()
        self.repo.try_git("update-ref", "-d", ref)  # the task branch holds it from here
        return commit

    # -- one attempt -------------------------------------------------------------

    def attempt(self, scope: AttemptScope) -> Outcome | str:
        """Run one attempt remotely. An Outcome when it ended without work to merge,
        else the commit to merge (already on the task branch)."""
        ctx, task, ts = scope.ctx, scope.task, scope.ts
        repo = ctx.repo
        assert ts.base is not None and ts.branch is not None
        if self.lost:
            return Outcome(Status.INTERRUPTED, f"cluster: {self.lost}")
        if repo.ref_value(ts.branch) is None:
            repo.update_ref(ts.branch, ts.base, None, message="forge: task branch")
        start, salvaged = reset_for_attempt(
            repo,
            ctx.plan,
            ts,
            None,
            start=Start(
                fresh=scope.fresh,
                shell=task.run is not None,
                integration_head=repo.ref_value(ctx.state.integration),
                known_clean=True,
            ),
            record=partial(ctx.record, later=True),
        )
        if salvaged:
            ctx.record()
        job = self._job(scope, start)
        self.publish(start, job.job_ref)
        result = self._wait(ctx, job)
        return self._land(scope, job, result)

    def _job(self, scope: AttemptScope, start: str) -> Job:
        plan, task, n = scope.ctx.plan, scope.task, scope.attempt.number
        return Job(
            key=f"{plan.name}/{task.id}/{n}/{self.nonce}",
            order=order_for(scope),
            remote=self.remote,
            job_ref=f"refs/forge/jobs/{plan.name}/{task.id}/{n}",
            result_ref=f"refs/forge/results/{plan.name}/{task.id}/{n}",
            start=start,
            identity=identity(scope.ctx.repo),
            stop_event=self.stop_name,
            grace=scope.ctx.settings.grace,
            tag=scope.attempt.tag or "",
            log_cap=plan.log_cap,
            sandbox=scope.ctx.sandbox,
        )

    def _wait(self, ctx: RunContext, job: Job) -> JobResult:
        from forge.cluster.worker import run_job

        try:
            future = self.client.submit(run_job, job, key=f"forge-{job.key}", pure=False, retries=0)
        except Exception as exc:  # noqa: BLE001 dask raises many kinds: each one means the scheduler refused
            return self._lose(f"cannot submit to the scheduler: {exc}")
        stopping_since: float | None = None
        unreachable_since: float | None = None
        # Waited on through a callback, and read without a timeout once done:
        # `future.result(timeout=...)` can lose the race between its two timeouts on a
        # loaded machine and raise UnboundLocalError instead of the job's answer.
        finished = threading.Event()
        future.add_done_callback(lambda _future: finished.set())
        while True:
            if finished.wait(0.5):
                try:
                    result: JobResult = future.result()
                except Exception as exc:  # noqa: BLE001 the job's own exception comes back here, of any kind
                    return self._failed(exc, job.key)
                break
            if ctx.stop.is_set() and stopping_since is None:
                self.stop_all()
                stopping_since = time.monotonic()
            if stopping_since is not None and time.monotonic() - stopping_since > STOP_WAIT:
                reason = f"{messages.STOPPED} (the worker did not answer)"
                return JobResult(Outcome(Status.INTERRUPTED, reason))
            if self.client.status != "running":
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > LOST_AFTER or stopping_since:
                    return self._lose(f"lost the scheduler at {self.config.address}")
            else:
                unreachable_since = None
        with contextlib.suppress(Exception):
            from distributed import Variable

            Variable(f"forge-claim-{job.key}", client=self.client).delete()
        return result

    def _failed(self, exc: BaseException, key: str) -> JobResult:
        name = type(exc).__name__
        if name == "KilledWorker":
            return lost_worker(self._claimed_by(key))
        lost = ("CancelledError", "FutureCancelledError", "CommClosedError")
        if self.client.status != "running" or name in lost:
            return self._lose(f"lost the scheduler at {self.config.address} ({name})")
        return JobResult(Outcome(Status.FAILED, f"forge error on the worker: {name}: {exc}"))

    def _claimed_by(self, key: str) -> str | None:
        """Where the job started (the worker that died under it), if it said so."""
        from distributed import Variable

        try:
            return str(Variable(f"forge-claim-{key}", client=self.client).get(timeout=0))
        except Exception:  # noqa: BLE001 any failure to ask: the address is unknown
            return None

    def _lose(self, why: str) -> JobResult:
        self.lost = why
        return JobResult(Outcome(Status.INTERRUPTED, f"cluster: {why}"))

    def _land(self, scope: AttemptScope, job: Job, result: JobResult) -> Outcome | str:
        ctx, ts, attempt = scope.ctx, scope.ts, scope.attempt
        repo = ctx.repo
        assert ts.branch is not None
        tid, number = scope.task.id, attempt.number
        said = result.said(tid, number, logs=scope.dir)  # its review's log is here now
        for name, text in result.logs.items():
            (scope.dir / name).write_text(text)
        said.append(ev.FeedbackNoted(tid, number, log=str(scope.dir / (result.log or "agent.log"))))
        said += [ev.Warned(tid, warning) for warning in result.warnings]
        self.lost = self.lost or result.refused
        if self.lost:
            said.append(
                ev.Paused(
                    f"cluster: {self.lost}; run `forge run {ctx.plan.name}` again "
                    "(here, or with --cluster)"
                )
            )
        ctx.record(*said, later=True)
        outcome = result.outcome
        commit = self.fetch(job.result_ref) if result.commit else None
        if commit is not None and outcome is not None and outcome.status in UNCOUNTED:
            # A void attempt: its work is kept, named, and not built upon.
            salvage = worktrees.keep(repo, commit, plan=ctx.plan.name, task=scope.task.id)
            ctx.record(ev.Salvaged(tid, (salvage,)), later=True)
            commit = None
        if commit is not None:
            repo.update_ref(ts.branch, commit, job.start, message="forge: attempt on the cluster")
            diff_hash = result.attempt.diff_hash if result.attempt else None
            ctx.record(ev.Committed(tid, number, commit, diff_hash), later=True)
        if outcome is not None:
            return outcome
        assert commit is not None, "work that passed its steps is a commit"
        return commit


def local_cache(repo: Repository, plan: str) -> Path:
    """Where `local:N` workers keep their mirror and slots: beside the plan's slots."""
    return repo.worktrees_root() / plan / LOCAL_CACHE


def identity(repo: Repository) -> dict[str, str]:
    """The user's author and committer, as git here knows them, for the worker's
    commits (a worker's own git config is not the user's)."""
    env: dict[str, str] = {}
    for role in ("AUTHOR", "COMMITTER"):
        cp = repo.try_git("var", f"GIT_{role}_IDENT")
        name, _, rest = cp.stdout.partition(" <")
        email = rest.partition(">")[0]
        if cp.returncode != 0 or not email:
            name, email = "forge", "forge@localhost"
        env[f"GIT_{role}_NAME"] = name.strip()
        env[f"GIT_{role}_EMAIL"] = email
        date = os.environ.get(f"GIT_{role}_DATE")
        if date:
            env[f"GIT_{role}_DATE"] = date
    return env


@contextlib.contextmanager
def connected(repo: Repository, plan: str, config: ClusterConfig) -> Iterator[Cluster]:
    cluster = Cluster(repo, plan, config)
    try:
        cluster.open()
        yield cluster
    finally:
        cluster.close()


def from_settings(
    repo: Repository, address: str | None, config: RepoConfig
) -> Callable[[Plan], contextlib.AbstractContextManager[Cluster]] | None:
    """What `forge run --cluster` hands the runner: None (run here) when neither the
    flag nor `[cluster] address` in forge.toml (`config`, as the run read it) names a
    cluster, else a function opening the run's cluster. A bad address or a missing
    Dask is said before anything starts."""
    address = address or config.cluster_address
    if not address:
        return None
    local_n = parse_address(address)
    if not config.cluster_remote and local_n is None and not is_this_machine(address):
        raise remote_needed(address)
    settings = ClusterConfig(
        address, config.cluster_remote, config.cluster_tls, config.cluster_insecure
    )
    if local_n is None:
        check_transport(settings)
    require_dask()

    def open_for(plan: Plan) -> contextlib.AbstractContextManager[Cluster]:
        return connected(repo, plan.name, settings)

    return open_for


INSECURE_HINT = (
    "give [cluster] tls_ca, tls_cert and tls_key in forge.toml with a tls:// address, "
    "or say [cluster] insecure = true"
)


def check_transport(config: ClusterConfig) -> None:
    """A scheduler is reached over TLS with the certificates `[cluster]` names, or
    without TLS only when `[cluster] insecure = true` says so: anyone who reaches an
    unauthenticated scheduler runs code on its workers."""
    tls = config.address.startswith("tls://")
    if config.tls is not None and not tls:
        raise ForgeError(
            f"--cluster {config.address}: [cluster] names TLS certificates, so the "
            "address must be tls://host:port"
        )
    if tls and config.tls is None:
        raise ForgeError(
            f"--cluster {config.address}: a tls:// scheduler needs certificates: "
            "give [cluster] tls_ca, tls_cert and tls_key in forge.toml"
        )
    if not tls and not config.insecure:
        raise ForgeError(
            f"--cluster {config.address}: the scheduler would be reached without TLS, so "
            f"anyone who reaches it runs code on its workers; {INSECURE_HINT}"
        )
    for path in config.tls or ():
        if not Path(path).expanduser().is_file():
            raise ForgeError(f"[cluster] in forge.toml names {path}, which is not a file")


def local_security() -> DaskObject:
    """A certificate made for this run alone (`local:N`)."""
    try:
        from distributed.security import Security

        return Security.temporary()
    except ImportError:
        raise ForgeError(INSTALL_HINT, code=ExitCode.USAGE) from None


def remote_security(config: ClusterConfig) -> DaskObject:
    """The TLS settings of a remote scheduler (None: reached without TLS)."""
    if config.tls is None:
        return None
    from distributed.security import Security

    ca, cert, key = (str(Path(p).expanduser()) for p in config.tls)
    return Security(
        tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True
    )
