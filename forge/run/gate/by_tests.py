"""A failed batch judged by its failing tests: what forge/run/gate/bisection.py does
when the failing lanes name their tests and can run them alone
(forge/run/gate/subsets.py). Pure: the whole verification, the subset runs and
what a record's failing tests are come in as a Probe.

The candidate chain's tip ran the whole lane and failed the tests T. Then:

1. (`gate_on = "regressions"`) T runs on the integration head itself: the tests
   that fail there too are pre-existing, and blame nobody; a test absent from the
   head is new and is not run there. With reruns allowed, a test failing on the
   head that is not known there already (`red`) runs there once more: one that
   passes now is flaky on the head (a flake, never a pre-existing failure).
2. (reruns allowed) what is left of T runs again on the tip: a test that passes
   now was a flake. A new test is not rerun.

A flake is told by one rule, forge/verify/flakes.py's `passed_again`.
3. Nothing left: the whole chain lands (its failures were pre-existing or flakes).
4. Otherwise the prefixes are bisected running only what is left of T, stopping
   at the first failure. The first prefix that fails names the culprit; the
   prefix before it runs the whole lane (the tree that lands), and a new failure
   there starts again at 1 on that shorter chain (the culprit is then the earlier
   one; the tasks after it are queued again).

With `gate_on = "green"` nothing is pre-existing: a culprit found at the chain's
first task is checked against the head, and a head that fails those tests itself
blames nobody (as without tests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from forge.frozen import frozen
from forge.verify.flakes import passed_again
from forge.verify.records import Verdict

Tests = Mapping[str, frozenset[str]]  # lane -> test ids


class Judged(Protocol):
    @property
    def verdict(self) -> Verdict: ...


class Probe(Protocol):
    """What the gate supplies (forge/run/gate/subsets.py's GateProbe)."""

    def whole(self, commit: str) -> Judged:
        """Every lane, as a verification of the gate's."""
        ...

    def failing(self, judged: Judged) -> dict[str, frozenset[str]] | None:
        """A FAIL's failing tests by lane; None when a failing lane names none or
        cannot run them alone."""
        ...

    def subset(self, commit: str, tests: Tests, *, first: bool, why: str) -> Judged | None:
        """Only `tests`, once (`first`: stop at the first failure); None: it cannot."""
        ...

    def exists(self, commit: str, test: str) -> bool:
        """The test is found in the commit's tree."""
        ...


def minus(a: Tests, b: Tests) -> dict[str, frozenset[str]]:
    out = {lane: ids - b.get(lane, frozenset()) for lane, ids in a.items()}
    return {lane: ids for lane, ids in out.items() if ids}


def union(a: Tests, b: Tests) -> dict[str, frozenset[str]]:
    out = dict(a)
    for lane, ids in b.items():
        out[lane] = out.get(lane, frozenset()) | ids
    return {lane: ids for lane, ids in out.items() if ids}


def _known(tests: Tests, probe: Probe, commit: str) -> dict[str, frozenset[str]]:
    """The tests the commit has (one the integration head lacks is new: neither run
    there nor rerun)."""
    out = {
        lane: frozenset(t for t in ids if probe.exists(commit, t)) for lane, ids in tests.items()
    }
    return {lane: ids for lane, ids in out.items() if ids}


class Interrupted(Exception):
    """A subset run was stopped: the batch lands nothing."""


class Unreadable(Exception):
    """A run that says nothing per test: the caller falls back to whole runs."""


def _failed(probe: Probe, judged: Judged | None, asked: Tests) -> dict[str, frozenset[str]]:
    """Which of `asked` failed in a subset run."""
    if judged is None:
        raise Unreadable
    if judged.verdict == Verdict.INTERRUPTED:
        raise Interrupted
    if judged.verdict != Verdict.FAIL:
        return {}
    named = probe.failing(judged)
    if not named:
        raise Unreadable  # it failed without naming a test of those asked
    return {lane: ids & asked.get(lane, frozenset()) for lane, ids in named.items()}


@frozen
class ByTests:
    """How a failure is judged by its tests: the `probe` that runs them; with
    `regressions` (`gate_on`) failures the head has too land; with `confirm` the
    failing tests run once more; `red`: the tests known to fail on the head already
    (not run there twice)."""

    probe: Probe
    regressions: bool = False
    confirm: bool = False
    red: Tests | None = None


class Found:
    """What came of it, for the caller's Outcome."""

    def __init__(self) -> None:
        self.landed = 0  # prefixes that land (the chain's first `landed` steps)
        self.tip_record: Judged | None = None
        self.culprit: int | None = None
        self.culprit_record: Judged | None = None
        self.pre_existing: dict[str, frozenset[str]] = {}
        self.flaky: dict[str, frozenset[str]] = {}
        self.broken_head: Judged | None = None


def settle(
    commits: list[str],
    head: str,
    tip: Judged,
    fails: Tests,
    by: ByTests,
    *,
    on_bisect: Callable[[int, int, int], None] = lambda _size, _good, _bad: None,
) -> Found:
    """`commits[k-1]` is prefix k; `tip` (prefix len(commits)) failed `fails`;
    Raises Interrupted or Unreadable."""
    probe, regressions = by.probe, by.regressions
    found = Found()
    end, record = len(commits), tip
    while True:
        new = _new(found, commits[end - 1], head, fails, by)
        if not new:  # pre-existing failures and flakes only: the chain lands
            found.landed, found.tip_record = end, record
            return found
        culprit, bad_record = _bisect(commits[:end], new, probe, record, on_bisect)
        if culprit == 0 and not regressions and (asked := _known(new, probe, head)):
            judged = probe.subset(head, asked, first=False, why="head")
            if _failed(probe, judged, asked):
                found.broken_head = judged
                return found
        found.culprit, found.culprit_record = culprit, bad_record
        if culprit == 0:
            return found
        end = culprit
        record = probe.whole(commits[end - 1])  # the tree that lands runs every test
        if record.verdict == Verdict.INTERRUPTED:
            raise Interrupted
        if record.verdict != Verdict.FAIL:
            found.landed, found.tip_record = end, record
            return found
        named = probe.failing(record)
        if not named:
            raise Unreadable
        fails = named


def _new(found: Found, tip: str, head: str, fails: Tests, by: ByTests) -> dict[str, frozenset[str]]:
    """What of `fails` is neither the head's own failure nor a flake (steps 1-2)."""
    probe, regressions, confirm, red = by.probe, by.regressions, by.confirm, by.red or {}
    new = minus(minus(fails, found.pre_existing), found.flaky)
    if regressions and (asked := _known(new, probe, head)):
        on_head = _failed(probe, probe.subset(head, asked, first=False, why="head"), asked)
        if confirm and (doubt := minus(on_head, red)):
            # Failing on the head once is no proof that the head fails it: run again
            # there, a test that passes now is flaky, not the head's own failure.
            why = "head again"
            again = _failed(probe, probe.subset(head, doubt, first=False, why=why), doubt)
            flaked = passed_again(doubt, again)
            found.flaky = union(found.flaky, flaked)
            on_head = minus(on_head, flaked)
        found.pre_existing = union(found.pre_existing, on_head)
        new = minus(minus(new, on_head), found.flaky)
    if new and confirm and (asked := _known(new, probe, head)):
        again = _failed(probe, probe.subset(tip, asked, first=False, why="rerun"), asked)
        flaked = passed_again(asked, again)
        found.flaky = union(found.flaky, flaked)
        new = minus(new, flaked)
    return new


def _bisect(
    commits: list[str],
    new: Tests,
    probe: Probe,
    record: Judged,
    on_bisect: Callable[[int, int, int], None],
) -> tuple[int, Judged]:
    """The culprit's index among `commits` (whose last fails `new`), by running
    only `new` on the prefixes, and the run that failed at the culprit."""
    end = len(commits)
    bad, bad_record, good = end, record, 0
    while bad - good > 1:
        on_bisect(end, good, bad)
        k = (good + bad) // 2
        there = _known(new, probe, commits[k - 1])  # a test a later task adds
        judged = probe.subset(commits[k - 1], there, first=True, why="bisection")
        if there and judged is None:
            raise Unreadable
        if judged is not None and judged.verdict == Verdict.INTERRUPTED:
            raise Interrupted
        if judged is not None and judged.verdict == Verdict.FAIL:
            bad, bad_record = k, judged
        else:
            good = k
    on_bisect(end, good, bad)  # the bisection is over
    return bad - 1, bad_record
