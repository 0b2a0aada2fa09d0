"""The gate's logic: which queued tasks make a batch, and how a failed batch is
bisected. Pure: git, the verification and the run state come in as functions
(forge/run/gate/batch.py supplies them), so every case can be tested exhaustively.

A batch is merged, task after task, onto the integration head into a candidate
chain; prefix k of the chain is the commit after its first k merges (prefix 0 is
the head, which passed when it landed). The verification judges the tip. When it
fails, a binary search over the prefixes finds the first failing one: the tasks
before its last task land (that prefix passed), its last task is the culprit, the
tasks after it go back to the front of the queue and are rebuilt on the new head.
One culprit among N costs the tip, ceil(log2 N) probes and the next batch. With
`width` > 1 (`verify_parallel`), up to `width` prefixes are judged at once, evenly
spread over what is left: ceil(log_(width+1) N) rounds of probes. A failure whose
tests are named and can run alone is judged by those tests instead
(forge/run/gate/by_tests.py): the head's own failures land, and the probes run
only the failing tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from forge.frozen import frozen
from forge.plan.model import Gate
from forge.run.gate import by_tests
from forge.verify.records import Verdict

Mode: TypeAlias = Gate  # queue, end or off


class Judged(Protocol):
    """What a verification answers (a VerifyRecord)."""

    @property
    def verdict(self) -> Verdict: ...


@dataclass
class Bisection:
    """Binary search for the first failing prefix of a chain of `size` steps whose
    whole chain failed and whose empty prefix passes."""

    size: int
    good: int = 0  # the longest prefix known to pass
    bad: int = -1  # the shortest prefix known to fail

    def __post_init__(self) -> None:
        if self.bad < 0:
            self.bad = self.size

    def probes(self, width: int) -> list[int]:
        """Up to `width` prefixes to judge at once, evenly spread between the last
        known pass and the first known failure; [] when the culprit is known."""
        span = self.bad - self.good
        n = min(width, span - 1)
        if n < 1:
            return []
        return sorted({self.good + round(i * span / (n + 1)) for i in range(1, n + 1)})

    def record(self, prefix: int, ok: bool) -> None:
        if ok:
            self.good = max(self.good, prefix)
        else:
            self.bad = min(self.bad, prefix)

    def record_all(self, judged: dict[int, bool]) -> None:
        """Prefixes judged at once: the first failure bounds the search, and the last
        pass before it (what passed beyond a failure says nothing of the culprit)."""
        failed = [k for k, ok in judged.items() if not ok]
        if failed:
            self.record(min(failed), False)
        for k, ok in judged.items():
            if ok and k < self.bad:
                self.record(k, True)

    def rounds(self, width: int) -> int:
        """Rounds of probes at most still needed to name the culprit, `width` judged
        at once."""
        span, n = self.bad - self.good, 0
        while span > 1:
            span, n = math.ceil(span / (min(width, span - 1) + 1)), n + 1
        return n

    @property
    def culprit(self) -> int:
        """The culprit's index in the chain (once `probes` says [])."""
        return self.bad - 1


@dataclass
class Window:
    """How many queued tasks the next batch takes (under `queue`): `batch_max` at
    first, halved after a batch that named a culprit, one more after each batch
    that passed, never below 1 nor above `batch_max` (as Zuul's merge queue)."""

    ceiling: int
    size: int = 0
    fixed: bool = False  # `batch_window = "fixed"`: always `batch_max`

    def __post_init__(self) -> None:
        self.size = self.size or self.ceiling

    def passed(self) -> None:
        self.size = min(self.ceiling, self.size + 1)

    def failed(self) -> None:
        if not self.fixed:
            self.size = max(1, self.size // 2)


def take_batch(queue: Sequence[str], *, mode: Mode, batch_max: int) -> list[str]:
    """The next batch: the queue's first `batch_max` tasks; all of it under `end`."""
    return list(queue) if mode == "end" else list(queue[:batch_max])


@frozen
class Step:
    """One merge of the candidate chain: the task and the commit of its prefix."""

    task: str
    commit: str


@frozen
class Chain:
    steps: tuple[Step, ...]  # in batch order, conflicts left out
    conflicts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # task -> paths
    already: tuple[str, ...] = ()  # tasks whose work the head already holds
    refused: dict[str, str] = field(default_factory=dict)  # task -> why no merge can be built


@dataclass
class Outcome:
    """What a batch comes to. `landed` ends at `tip`, judged by `tip_record`."""

    chain: Chain
    landed: list[Step] = field(default_factory=list)
    tip_record: Judged | None = None
    culprit: Step | None = None
    culprit_record: Judged | None = None  # the failing verification that names it
    requeue: list[str] = field(default_factory=list)
    interrupted: bool = False
    broken_head: Judged | None = None  # the head itself fails: nobody is to blame
    # judged by tests (forge/run/gate/by_tests.py): what the landed tree fails that
    # the head failed already, and what failed once and passed when run again
    pre_existing: dict[str, frozenset[str]] = field(default_factory=dict)
    flaky: dict[str, frozenset[str]] = field(default_factory=dict)
    empty: Judged | None = None  # a test runner ran no test: nothing lands, nobody is blamed
    # the culprit's own failing tests, by lane ({}: those of `culprit_record`), and
    # whether they fail only in whole runs (order-dependent)
    culprit_tests: dict[str, frozenset[str]] = field(default_factory=dict)
    order_dependent: bool = False

    @property
    def tip(self) -> str | None:
        return self.landed[-1].commit if self.landed else None


Progress = Callable[[str, Bisection | None], None]
JudgeMany = Callable[[Sequence[str]], Sequence[Judged]]  # commits judged at once, in order


@frozen
class Judges:
    """How a batch's candidates are judged: `judge`, one commit; `many`, up to
    `width` commits at once (parallel bisection); `tests`, a failure whose tests
    are named judged by those tests (forge/run/gate/by_tests.py)."""

    judge: Callable[[str], Judged]
    many: JudgeMany | None = None
    width: int = 1
    tests: by_tests.ByTests | None = None


def _halts(out: Outcome, judged: Sequence[Judged]) -> bool:
    """Whether a verdict ends the batch here: one was stopped (INTERRUPTED), or a test
    runner ran no test (EMPTY: nothing lands, nobody is blamed)."""
    if any(r.verdict == Verdict.INTERRUPTED for r in judged):
        out.interrupted = True
        return True
    out.empty = next((r for r in judged if r.verdict == Verdict.EMPTY), None)
    return out.empty is not None


def run_batch(
    tasks: Sequence[str],
    *,
    head: str,
    build: Callable[[Sequence[str]], Chain],
    judges: Judges,
    progress: Progress = lambda _phase, _b: None,
) -> Outcome:
    """Build the candidate chain of `tasks` on `head`, judge it, bisect a failure.

    With `judges.tests`, a failure whose tests are named is judged by those tests
    (forge/run/gate/by_tests.py). Nothing here moves a ref: the caller lands
    `landed` (its tip) when it is not empty, and acts on the culprit, the conflicts
    and the tasks to queue again.
    """
    judge, judge_many, width = judges.judge, judges.many, judges.width
    chain = build(tasks)
    out = Outcome(chain=chain)
    steps = list(chain.steps)
    if not steps:
        return out
    progress("verifying", None)
    records: dict[int, Judged] = {}

    def verdict_of(prefix: int) -> Verdict:
        commit = head if prefix == 0 else steps[prefix - 1].commit
        record = judge(commit)
        records[prefix] = record
        return record.verdict

    tip = verdict_of(len(steps))
    if _halts(out, [records[len(steps)]]):
        return out
    if tip != Verdict.FAIL:
        out.landed, out.tip_record = steps, records[len(steps)]
        return out
    if judges.tests is not None:
        found = _by_tests(out, steps, head, records[len(steps)], judges.tests, progress)
        if found is not None:
            return found
    search = Bisection(len(steps))
    progress("bisecting", search)
    many = judge_many or (lambda commits: [judge(c) for c in commits])
    while probes := search.probes(width if judge_many else 1):
        judged = many([steps[k - 1].commit for k in probes])
        records.update(zip(probes, judged, strict=True))
        if _halts(out, judged):
            return out
        search.record_all(
            {k: r.verdict != Verdict.FAIL for k, r in zip(probes, judged, strict=True)}
        )
        progress("bisecting", search)
    culprit = search.culprit
    if culprit == 0:
        # Prefix 0 is the head, never judged by this batch: when the head fails on
        # its own (a broken base), the first task is not to blame.
        verdict = verdict_of(0)
        if verdict == Verdict.INTERRUPTED:
            out.interrupted = True
            return out
        if verdict == Verdict.FAIL:
            out.broken_head = records[0]
            return out
    out.landed = steps[:culprit]
    out.tip_record = records.get(culprit)
    out.culprit, out.culprit_record = steps[culprit], records[search.bad]
    out.requeue = [s.task for s in steps[culprit + 1 :]]
    return out


def _settled(out: Outcome, steps: list[Step], found: by_tests.Found) -> Outcome:
    if found.broken_head is not None:
        out.broken_head = found.broken_head
        return out
    out.landed, out.tip_record = steps[: found.landed], found.tip_record
    out.pre_existing, out.flaky = found.pre_existing, found.flaky
    if found.culprit is not None:
        out.culprit, out.culprit_record = steps[found.culprit], found.culprit_record
        out.requeue = [s.task for s in steps[found.culprit + 1 :]]
        out.culprit_tests, out.order_dependent = found.culprit_tests, found.order_dependent
    return out


def _by_tests(
    out: Outcome,
    steps: list[Step],
    head: str,
    tip: Judged,
    by: by_tests.ByTests,
    progress: Progress,
) -> Outcome | None:
    """A failed chain judged by its failing tests; None when they are not known."""
    fails = by.probe.failing(tip)
    if not fails:
        return None
    try:
        found = by_tests.settle(
            [s.commit for s in steps],
            head,
            tip,
            fails,
            by,
            on_bisect=lambda size, good, bad: progress("bisecting", Bisection(size, good, bad)),
        )
    except by_tests.Interrupted:
        out.interrupted = True
        return out
    except by_tests.Unreadable:
        return None  # a run that named no test: whole runs, as without tests
    return _settled(out, steps, found)
