"""The gate's queue: the tasks waiting to be verified, in order, and the thread that
takes them a batch at a time.

The dispatcher adds to it (`submit`) and asks whether the gate is done (`idle`);
under `gate = "end"` nothing is taken until the dispatcher lets it (`release`). A
batch is the speculation's, when one was built for exactly the tasks at the front
on the head as it is (forge/run/gate/speculation.py), else the window's size of
tasks. While a batch runs, the speculations are topped up on its candidate tip as
tasks arrive, and thrown away when that candidate fails."""

from __future__ import annotations

import threading
from collections.abc import Callable

from forge.run.context import RunContext
from forge.run.gate import bisection as gate
from forge.run.gate.speculation import Speculator


class GateQueue:
    """The tasks waiting for the gate, taken in batches by a thread of its own."""

    def __init__(
        self,
        ctx: RunContext,
        tasks: list[str],
        *,
        mode: gate.Mode,
        spec: Speculator,
        halted: Callable[[], bool],
    ) -> None:
        self.ctx = ctx
        self.tasks = tasks
        self.mode = mode
        self.spec = spec
        self.halted = halted  # nothing more is taken (the head is broken, or a stop)
        plan = ctx.plan
        # halves after a culprit, one more after a pass (`batch_window = "adaptive"`)
        self.window = gate.Window(plan.batch_max, fixed=plan.batch_window != "adaptive")
        self.error: BaseException | None = None
        self._cond = threading.Condition()
        self._busy = False
        self._released = False  # `end`: nothing else can start until something lands
        self._closed = False
        self._thread: threading.Thread | None = None
        self._tip: str | None = None  # the running batch's candidate tip

    def start(self, run: Callable[[list[str]], None], wake: Callable[[], None]) -> None:
        """Take batches on a thread of its own: `run` each, then `wake` the dispatcher."""
        self._thread = threading.Thread(
            target=self._loop, args=(run, wake), name="gate", daemon=True
        )
        self._thread.start()

    def submit(self, task: str) -> None:
        with self._cond:
            self.tasks.append(task)
            self._cond.notify_all()
            # Under the lock: the tip is still the running batch's, not a stale one.
            if self._tip is not None:
                self.spec.top_up(self._tip, self.tasks, self.window.size)

    def release(self, flag: bool) -> None:
        with self._cond:
            if flag != self._released:
                self._released = flag
                self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing being verified, and nothing queued that will be."""
        with self._cond:
            if self._busy:
                return False
            return not self.tasks or self._stuck()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            while self._thread.is_alive():
                self._thread.join(0.1)  # a timed join stays responsive to signals

    def put_back(self, tasks: list[str]) -> None:
        """Tasks of the batch that go to the gate again, first."""
        with self._cond:
            self.tasks[:0] = tasks

    def built(self, tip: str) -> None:
        """The running batch's candidate tip: the next batches are built on it."""
        with self._cond:
            self._tip = tip
            self.spec.top_up(tip, self.tasks, self.window.size)

    def tip_failed(self) -> None:
        """The running batch's candidate failed: what was built on it is thrown away."""
        with self._cond:
            tip, self._tip = self._tip, None
            self.spec.discard(tip)

    def _stuck(self) -> bool:
        return self.error is not None or self.halted()

    def _ready(self) -> bool:
        return bool(self.tasks) and (self.mode != "end" or self._released)

    def _loop(self, run: Callable[[list[str]], None], wake: Callable[[], None]) -> None:
        try:
            self._serve(run, wake)
        finally:
            self.spec.close()

    def _serve(self, run: Callable[[list[str]], None], wake: Callable[[], None]) -> None:
        while True:
            with self._cond:
                while not (self._closed or self._stuck() or self._ready()):
                    self._cond.wait(0.2)
                if self._closed or self._stuck():
                    return
                head = self.ctx.repo.ref_value(self.ctx.state.integration)
                batch = self.spec.take(head or "", self.tasks) or gate.take_batch(
                    self.tasks, mode=self.mode, batch_max=self.window.size
                )
                del self.tasks[: len(batch)]
                self._busy = True
            try:
                run(batch)
            except BaseException as exc:  # noqa: BLE001 - reported by the runner, after the dispatch
                self.error = exc
                with self._cond:
                    self.tasks[:0] = batch
            finally:
                with self._cond:
                    self._busy, self._tip = False, None
                wake()
