"""What the dispatch remembers of each task for this run only: what runs, the
retries spent, the backoffs, the notes to say when a task starts. None of it is
the run's state (that is the journal's): a run started again starts it afresh."""

from __future__ import annotations

import time


class Book:
    """Per-task memory of one dispatch. Only the loop thread reads or changes it;
    the best-of-N candidates share `running` and `retries` (forge/run/candidates.py)."""

    def __init__(self, forced: str | None) -> None:
        self.running: set[str] = set()  # the tasks and units running now
        self.retries: dict[str, int] = {}  # failed-task retries spent in this run
        self.not_before: dict[str, float] = {}  # backoff after an infrastructure failure
        self.since: dict[str, float] = {}  # when each running task started
        self.notes: dict[str, str] = {}  # escalation notes, said when the task starts
        self.no_auto: set[str] = set()  # tasks the policy says not to retry automatically
        self.forced = forced  # `forge retry`: dispatch it even though it failed

    def settled(self, tid: str) -> None:
        """`tid` started, or the policy or its round ended it: it is forced no more."""
        if self.forced == tid:
            self.forced = None

    def retried(self, tid: str) -> None:
        self.retries[tid] = self.retries.get(tid, 0) + 1

    def started(self, tid: str) -> None:
        self.since[tid] = time.monotonic()

    def backoff(self, tid: str, seconds: float) -> None:
        """An infrastructure failure: `tid` starts again here after `seconds`."""
        self.not_before[tid] = time.monotonic() + seconds

    def backed_off(self, tid: str) -> bool:
        return time.monotonic() < self.not_before.get(tid, 0.0)

    def forget(self, tid: str) -> None:
        """A task the plan no longer has (`forge plan` while this runs)."""
        self.retries.pop(tid, None)
        self.not_before.pop(tid, None)
        self.notes.pop(tid, None)
        self.no_auto.discard(tid)
