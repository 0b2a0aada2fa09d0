"""The worker threads of a dispatch: each attempt runs on one and reports its end
through a queue that the loop thread alone reads. A worker never dies silently:
whatever its attempt raises ends as an outcome the loop waits for."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING

from forge.base.files import DiskFull
from forge.base.text import one_line
from forge.errors import ForgeError
from forge.plan.model import Task
from forge.run.attempt import messages
from forge.run.attempt.context import Asked, Outcome, Remote
from forge.run.attempt.pipeline import run_attempt
from forge.run.context import RunContext
from forge.run.state.run_state import Status

if TYPE_CHECKING:
    from forge.agents.spec import AgentSpec

# What a worker puts on the queue: a task (or unit) and its outcome, or ("", None)
# to wake the loop (a slot became ready, the gate or a candidate has news).
Report = tuple[str, Outcome | None]


class Workers:
    """The thread pool of one dispatch and the queue its attempts report on."""

    def __init__(self, ctx: RunContext, max_parallel: int, remote: Remote | None) -> None:
        self.ctx = ctx
        self.max_parallel = max_parallel
        self.remote = remote  # where attempts run when not here: a cluster (forge.cluster)
        self.done: queue.Queue[Report] = queue.Queue()
        self.fatal: ForgeError | None = None  # an attempt could not start: the run stops
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> Workers:
        self._pool = ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="task")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Wait for every worker (a stopped run's attempts see the stop and end)."""
        assert self._pool is not None
        self._pool.shutdown(wait=True)
        self._pool = None

    def wake(self) -> None:
        """Have the loop look again (it may be waiting for a report)."""
        self.done.put(("", None))

    def never_started(self, tid: str) -> bool:
        """Did `tid`'s attempt fail before it was counted (the run stops for it)?"""
        return self.fatal is not None and self.fatal.message.startswith(
            f"cannot start an attempt of {tid}:"
        )

    def submit(self, ctx: RunContext, task: Task, spec: AgentSpec | None, asked: Asked) -> None:
        """Run an attempt of `task` on a worker thread, in `ctx` (a unit's own)."""
        assert self._pool is not None
        ts = self.ctx.state.record(task.id)
        counted = len(ts.attempts)

        def work() -> None:
            try:
                outcome = run_attempt(ctx, task, spec=spec, asked=asked, remote=self.remote)
            except DiskFull as full:
                self.fatal = full  # the run pauses: nobody's failure
                self.ctx.stop.set()
                outcome = Outcome(Status.INTERRUPTED, messages.DISK_FULL)
            except Exception as exc:  # noqa: BLE001 never let a worker die silently: the loop waits for it
                outcome = Outcome(Status.FAILED, messages.forge_error(exc))
                if len(ts.attempts) == counted:
                    # No attempt was counted (its logs folder cannot be made, ...): the
                    # next dispatch would fail the same way at once, forever. Stop.
                    self.fatal = ForgeError(
                        f"cannot start an attempt of {task.id}: {one_line(str(exc))}"
                    )
            except BaseException:
                # Ctrl-C or SystemExit is a stop, not a failed task (the attempt
                # recorded itself INTERRUPTED): stop the run, let the loop see it end.
                self.ctx.stop.set()
                self.done.put((task.id, Outcome(Status.INTERRUPTED, messages.FORGE_STOPPED)))
                raise
            self.done.put((task.id, outcome))

        self._pool.submit(work)

    def ended(self, *, block: bool) -> Iterator[tuple[str, Outcome]]:
        """The attempts that ended, each as it is taken from the queue (so one that
        ends while an earlier one is handled is handled in the same pass). `block`:
        wait a moment for the first report."""
        try:
            item = self.done.get(timeout=0.2) if block else self.done.get_nowait()
        except queue.Empty:
            return
        while True:
            tid, outcome = item
            if outcome is not None:  # None: a wake-up, look again
                yield tid, outcome
            try:
                item = self.done.get_nowait()
            except queue.Empty:
                return
