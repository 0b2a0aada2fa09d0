"""One attempt on a cluster worker: what `run_job` does where Dask runs it.

The worker gets the repository through git, never a shared file system: a bare
mirror of the coordinator's remote in its cache, and slots that are contained
repositories borrowing its objects (forge.cluster.slot), reused across attempts
as local slots are (setup runs once per slot and again when the setup command
changes). The attempt's steps are a local attempt's (forge.run.attempt.steps:
setup, the agent or command, the commit, the scope and progress checks, the
task's check), then its review (forge.run.attempt.review), in process groups
stopped with TERM, grace, KILL, under bubblewrap when the run asks for the
sandbox (a worker that cannot make one refuses, and the run pauses saying so).
The work is pushed to a result ref of its own; the coordinator fetches it and
merges.

A worker that dies mid-attempt leaves its processes in sessions of their own: the
next attempt on that machine stops every process tagged with a worker pid that is
no longer alive. A job that Dask runs a second time after its worker died answers
INFRA at once (its claim shows the earlier run), so the coordinator decides where
it runs again and no attempt is spent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
from pathlib import Path

from forge.base import logs, procgroup, sandbox
from forge.base.proc import pid_alive
from forge.cluster.job import Job, JobResult
from forge.cluster.slot import WORKER_PID_VAR, WorkerSlot, slot
from forge.git.contained import Tampered
from forge.run.attempt import messages, review
from forge.run.attempt.context import Outcome
from forge.run.attempt.steps import run_steps
from forge.run.state.run_state import UNCOUNTED, Attempt, Status

LOG_TAIL = 256 * 1024  # bytes of each log sent back to the coordinator
STOP_POLL = 0.2
SENT_BACK = (".log", review.FINDINGS)  # the files of the logs folder sent back


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
        why = sandbox.unavailable() if job.sandbox else None
        if why is not None:
            said = messages.no_sandbox(f"worker {where.split()[-1]}", why)
            return JobResult(Outcome(Status.INTERRUPTED, said), where=where, refused=said)
        with slot(job) as found:
            place = WorkerSlot(job, found, stop)
            try:
                return _attempt(place, where)
            finally:  # the logs went back with the result
                shutil.rmtree(place.logs, ignore_errors=True)
    finally:
        done.set()


def _attempt(place: WorkerSlot, where: str) -> JobResult:
    """The attempt's steps in the slot, then its review; its work pushed to the job's
    result ref."""
    job, order = place.job, place.job.order
    model = order.agent[1].model if order.agent is not None else None
    attempt = place.attempt = Attempt(number=order.number, agent="", model=model, tag=job.tag)
    try:
        with place.phase("worktree"):
            place.start()
        done = run_steps(order, place, attempt, job.start)
        if isinstance(done, str) and order.review is not None:
            done = reviewed(place, attempt, done) or done
        outcome = done if isinstance(done, Outcome) else None
        commit = attempt.commit
        if outcome is not None and outcome.status in UNCOUNTED:
            # Void work goes back too: the coordinator keeps it, named, built upon by nobody.
            void = place.commit(order.message)
            commit = void if void != job.start else None
    except Tampered as exc:
        outcome, commit = Outcome(Status.FAILED, messages.broken_git(exc)), attempt.commit
    if commit is not None:
        place.push(commit)
    tails = {p.name: logs.tail(p, LOG_TAIL) for p in sorted(place.logs.iterdir()) if p.is_file()}
    return JobResult(
        outcome,
        where=where,
        commit=commit,
        attempt=attempt,
        phases=tuple(place.phases),
        warnings=tuple(place.warnings),
        logs={name: text for name, text in tails.items() if name.endswith(SENT_BACK)},
        log=Path(attempt.log).name if attempt.log else None,
    )


def reviewed(place: WorkerSlot, attempt: Attempt, head: str) -> Outcome | None:
    """The task's reviewer on `head`, here (forge.run.attempt.review); None when it
    approves. Whatever it wrote or committed in the slot is dropped: the work it
    judged is `head`."""
    assert place.job.order.review is not None
    verdict = review.run_review(
        place.job.order.review,
        place,
        attempt,
        diff=review.diff_text(place.repo, place.job.order.base, head),
    )
    place.restore(head)
    task = place.job.order.task
    return review.outcome_of(verdict, place, task, attempt, place.logs / review.FINDINGS)


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
    except (TimeoutError, UnboundLocalError):  # none yet (over TLS, Dask's zero wait
        claim.set(where)  # is cancelled and says so with an UnboundLocalError)
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
        if owner is None or pid_alive(owner):
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
