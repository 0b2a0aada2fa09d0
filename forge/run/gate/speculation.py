"""Speculative verification (`verify_parallel` > 1): while the gate judges a batch,
the batches after it are built on top of its candidate tip and judged at the same
time, each in verification checkouts of its own (key `<plan>.spec<i>`: two
verifications never share a checkout).

A speculation only ever answers the gate's question "what is the verdict of this
tree?" for the batch it was built for, and only when that batch is taken on exactly
the base it was built on: the candidate under it landed, so it passed. When the
batch under it fails (the gate starts a bisection, requeues, or the integration head
is not that base), the speculation is stopped and its verdict is thrown away; its
tasks are built again on the new head and verified as usual. Nothing here moves a
ref, so what lands is still decided by the gate alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from forge.base.interrupt import LinkedStop
from forge.run.gate import bisection as gate
from forge.verify.records import Verdict, VerifyRecord

# (commit, checkout key, stop) -> the record; the gate's verification
Verify = Callable[[str, str, threading.Event], VerifyRecord]
Build = Callable[[str, Sequence[str]], gate.Chain]


@dataclass
class Speculation:
    base: str  # the candidate tip it is built on
    tasks: tuple[str, ...]  # the batch, as it will be taken from the queue
    tip: str
    tree: str
    slot: int  # its checkouts: key `<plan>.spec<slot>`
    stop: LinkedStop
    thread: threading.Thread | None = None
    record: VerifyRecord | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Speculator:
    """Up to `width - 1` speculations, each on top of the one before."""

    def __init__(
        self,
        *,
        width: int,
        key: str,
        stop: threading.Event,
        build: Build,
        verify: Verify,
        tree_of: Callable[[str], str],
    ) -> None:
        self.width = width
        self.key = key
        self.stop = stop
        self.build = build
        self.verify = verify
        self.tree_of = tree_of
        self.started = 0  # speculations started (for the bench and the tests)
        self._lock = threading.RLock()
        self._pending: list[Speculation] = []  # in batch order, each on the one before
        self._current: Speculation | None = None  # the one the running batch may use
        self._live: list[Speculation] = []  # threads not yet joined (their slots are busy)
        self._failed: set[str] = set()  # candidate tips that failed: nothing goes on them

    def top_up(self, tip: str, queue: Sequence[str], batch_max: int) -> None:
        """Start speculations for the full batches queued after the one whose
        candidate tip is `tip`."""
        with self._lock:
            if tip in self._failed:
                return
            base = self._pending[-1].tip if self._pending else tip
            offset = sum(len(s.tasks) for s in self._pending)
            # Full batches only: the batch a speculation fixes is then the one a
            # serial gate would take, so speculating never makes batches smaller
            # (measured: it cost more verifications than it saved time).
            while len(self._pending) < self.width - 1 and len(queue) >= offset + batch_max:
                slot = self._free_slot()
                if slot is None:
                    return
                tasks = tuple(queue[offset : offset + batch_max])
                chain = self.build(base, tasks)
                if not chain.steps:
                    return
                tip_commit = chain.steps[-1].commit
                spec = Speculation(
                    base, tasks, tip_commit, self.tree_of(tip_commit), slot, LinkedStop(self.stop)
                )
                spec.thread = threading.Thread(
                    target=self._run, args=(spec,), name=f"gate-spec{slot}", daemon=True
                )
                self._pending.append(spec)
                self._live.append(spec)
                self.started += 1
                spec.thread.start()
                base, offset = tip_commit, offset + len(tasks)

    def take(self, head: str, queue: Sequence[str]) -> list[str] | None:
        """The batch to take next when a speculation was built for it on `head`; None
        (and every speculation thrown away) otherwise."""
        with self._lock:
            self._current = None
            first = self._pending[0] if self._pending else None
            if (
                first is not None
                and first.base == head
                and tuple(queue[: len(first.tasks)]) == first.tasks
            ):
                self._current = self._pending.pop(0)
                return list(first.tasks)
            self.discard()
            return None

    def answer(self, tree: str) -> VerifyRecord | None:
        """The current speculation's verdict when it judged `tree` (waits for it)."""
        with self._lock:
            spec = self._current
        if spec is None or spec.tree != tree:
            return None
        while not spec.done.wait(0.1):  # a timed wait stays responsive to signals
            pass
        record = spec.record
        if record is None or record.verdict not in (Verdict.PASS, Verdict.FLAKY, Verdict.FAIL):
            return None  # stopped or broken: the gate verifies it itself
        return record

    def discard(self, failed: str | None = None) -> None:
        """Stop every speculation: the candidate `failed` under them failed (or the
        run ends)."""
        with self._lock:
            if failed is not None:
                self._failed.add(failed)
            for spec in [*self._pending, *([self._current] if self._current else [])]:
                spec.stop.set()
            self._pending.clear()
            self._current = None

    def close(self) -> None:
        self.discard()
        with self._lock:
            live = list(self._live)
        for spec in live:
            while not spec.done.wait(0.1):
                pass

    def _free_slot(self) -> int | None:
        self._live = [s for s in self._live if not s.done.is_set()]
        busy = {s.slot for s in self._live}
        return next((i for i in range(1, self.width) if i not in busy), None)

    def _run(self, spec: Speculation) -> None:
        try:
            if not spec.stop.is_set():
                spec.record = self.verify(spec.tip, f"{self.key}.spec{spec.slot}", spec.stop)
        except Exception:  # noqa: BLE001 - a speculation that breaks is only thrown away
            spec.record = None
        finally:
            spec.done.set()
