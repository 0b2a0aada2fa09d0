"""A failed batch judged by its failing tests: what forge/run/gate/bisection.py does
when the failing lanes name their tests and can run them alone
(forge/run/gate/subsets.py). Pure: the whole verification, the subset runs and
what a record's failing tests are come in as a Probe.

What lands passed a whole run of every lane that exited 0, with the forgiven tests
(quarantined; failing on the integration head under `gate_on = "regressions"`)
left out by their exact ids. Runs of some tests only choose what to run next and
whom to blame; they never stand for the whole run.

The candidate chain's tip ran the whole lane and failed the tests T. Then:

1. (`gate_on = "regressions"`) T runs on the integration head itself: the tests
   that fail there too are pre-existing (forgiven from then on). With reruns
   allowed, a test failing on the head that is not known there already (`red`)
   runs there once more: one that passes now is flaky on the head, not its own
   failure. A test absent from the head is new and is not run there.
2. (reruns allowed) what is left of T runs alone on the tip. A test that fails
   alone is a regression: the prefixes are bisected running one such test (the
   least flaky), the first prefix that fails names the culprit, and the prefix
   before it runs the whole lane (the tree that lands; a new failure there starts
   again at 1 on that shorter chain).
3. Nothing failed alone: the tip runs the whole lane again with the forgiven tests
   left out. It lands when that run exits 0 (FLAKY when a test failed in one whole
   run and passed in another: a flip on a candidate's tree, evidence for this
   verdict only). A test that fails the whole run again, and passes alone every
   time it runs alone, is order-dependent: it fails after another test, which a
   task of the chain added or changed (a polluter). When the head passes it in a
   whole run, the prefixes are bisected by whole runs, and the first that fails it
   names the culprit, blamed with "fails in the whole run, passes alone
   (order-dependent)".

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

    def whole(self, commit: str, forgive: Tests) -> Judged:
        """Every lane, as a verification of the gate's, `forgive`n tests left out."""
        ...

    def passes_whole(self, commit: str, tests: Tests) -> bool | None:
        """Whether a whole run of `commit` that exited 0 ran `tests` (None: none is
        known)."""
        ...

    def flakiness(self, lane: str, test: str, besides: str | None = None) -> int:
        """How flaky the test was seen to be (0: never seen to flip; `besides`: on
        trees other than that commit's): the least flaky test leads a bisection."""
        ...

    def failing(self, judged: Judged) -> dict[str, frozenset[str]] | None:
        """A FAIL's failing tests by lane; None when a failing lane names none or
        cannot run them alone."""
        ...

    def subset(
        self, commit: str, tests: Tests, *, first: bool, why: str, landed: bool = False
    ) -> Judged | None:
        """Only `tests`, once (`first`: stop at the first failure; `landed`: the
        commit is the integration head, not a candidate); None: it cannot."""
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
        # the culprit's own failing tests: those that fail alone on its tree (to be
        # confirmed there once more) or, `order_dependent`, in its whole runs
        self.culprit_tests: dict[str, frozenset[str]] = {}
        self.order_dependent = False
        self.whole_runs = 0  # whole runs made here (beside the batch's first)

    def forgive(self, red: Tests | None) -> dict[str, frozenset[str]]:
        """The tests a whole run leaves out beside the quarantined ones: those the
        head fails on its own."""
        return union(red or {}, self.pre_existing)


_ROUNDS = 8  # rounds of judging at most (each shortens the chain or forgives more)
_ALONE = 3  # runs alone, in all, before a test failing whole runs is order-dependent


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
    probe = by.probe
    found = Found()
    end, record = len(commits), tip
    alone: dict[str, frozenset[str]] = {}  # failed a whole run of the tip, passed alone
    for _round in range(_ROUNDS):
        real, passed = _new(found, commits[end - 1], head, fails, by)
        if real:
            culprit = _regression(found, (commits[:end], head), real, record, by, on_bisect)
            if culprit is None:
                return found
            end, alone = culprit, {}
        else:
            alone = union(alone, passed)
            record = _whole(found, probe, commits[end - 1], by)
            if record.verdict != Verdict.FAIL:
                found.landed, found.tip_record = end, record
                found.flaky = union(found.flaky, alone)  # (a flip on a candidate's tree)
                return found
            named = _named(probe, record)
            again = _order_dependent(probe, commits[end - 1], _meet(named, alone), found)
            if not again:
                fails = named
                continue
            on_head = _fails_whole_on_head(found, probe, head, again, by)
            again = minus(again, on_head)
            if not again:
                fails = named
                continue
            bad, good_record = _bisect_whole(found, commits[:end], again, by, record, on_bisect)
            if bad == 0:
                return found
            end, alone = bad, {}
            if good_record is not None and good_record.verdict != Verdict.FAIL:
                found.landed, found.tip_record = end, good_record
                return found
        # the tree that lands (the prefix before the culprit) runs every test
        record = _whole(found, probe, commits[end - 1], by)
        if record.verdict != Verdict.FAIL:
            found.landed, found.tip_record = end, record
            return found
        fails = _named(probe, record)
    raise Unreadable  # no end in sight by tests: whole runs decide, as without them


def _named(probe: Probe, record: Judged) -> dict[str, frozenset[str]]:
    named = probe.failing(record)
    if not named:
        raise Unreadable
    return named


def _meet(a: Tests, b: Tests) -> dict[str, frozenset[str]]:
    out = {lane: ids & b.get(lane, frozenset()) for lane, ids in a.items()}
    return {lane: ids for lane, ids in out.items() if ids}


def _whole(found: Found, probe: Probe, commit: str, by: ByTests) -> Judged:
    record = probe.whole(commit, found.forgive(by.red) if by.regressions else {})
    found.whole_runs += 1
    if record.verdict == Verdict.INTERRUPTED:
        raise Interrupted
    return record


def _regression(
    found: Found,
    chain: tuple[list[str], str],
    real: Tests,
    record: Judged,
    by: ByTests,
    on_bisect: Callable[[int, int, int], None],
) -> int | None:
    """Bisect the tests that fail alone: the culprit's index, or None when nothing
    lands (the culprit is the chain's first task, or the head fails on its own).
    `chain`: the commits of its prefixes, and the head they are built on."""
    probe = by.probe
    commits, head = chain
    culprit, bad_record = _bisect(commits, real, probe, record, on_bisect)
    if culprit == 0 and not by.regressions and (asked := _known(real, probe, head)):
        judged = probe.subset(head, asked, first=False, why="head", landed=True)
        if _failed(probe, judged, asked):
            found.broken_head = judged
            return None
    found.culprit, found.culprit_record = culprit, bad_record
    found.culprit_tests, found.order_dependent = dict(real), False
    return None if culprit == 0 else culprit


def _order_dependent(
    probe: Probe, tip: str, suspects: Tests, found: Found
) -> dict[str, frozenset[str]]:
    """Of `suspects` (failed two whole runs of the tip, passed alone once), those
    that pass alone every time they run alone (`_ALONE` runs in all) and were never
    seen to flip on another tree: a test that fails alone too, or flipped before, is
    a flake (a flake may fail two whole runs), no longer a suspect."""
    seen = {
        lane: frozenset(t for t in ids if probe.flakiness(lane, t, besides=tip))
        for lane, ids in suspects.items()
    }
    found.flaky = union(found.flaky, seen)
    left = minus(suspects, seen)
    for _ in range(_ALONE - 1):
        if not left:
            break
        judged = probe.subset(tip, left, first=False, why="alone again")
        failed = _failed(probe, judged, left)
        found.flaky = union(found.flaky, _meet(failed, left))
        left = minus(left, failed)
    return left


def _fails_whole_on_head(
    found: Found, probe: Probe, head: str, tests: Tests, by: ByTests
) -> dict[str, frozenset[str]]:
    """Which of `tests` the head fails in a whole run too (its own failure, forgiven
    from then on under `gate_on = "regressions"`): none when a whole run of the head
    that exited 0 ran them."""
    if probe.passes_whole(head, tests):
        return {}
    record = _whole(found, probe, head, by)
    if record.verdict != Verdict.FAIL:
        return {}
    on_head = _meet(probe.failing(record) or {}, tests)
    if by.regressions:
        found.pre_existing = union(found.pre_existing, on_head)
    return on_head


def _bisect_whole(
    found: Found,
    commits: list[str],
    tests: Tests,
    by: ByTests,
    record: Judged,
    on_bisect: Callable[[int, int, int], None],
) -> tuple[int, Judged | None]:
    """The culprit of order-dependent failures (`tests`: they pass alone on every
    prefix), by whole runs of the prefixes; and the whole run of the prefix before
    it, when one was made."""
    probe = by.probe
    end = len(commits)
    bad, bad_record, good, good_record = end, record, 0, None
    while bad - good > 1:
        on_bisect(end, good, bad)
        k = (good + bad) // 2
        judged = _whole(found, probe, commits[k - 1], by)
        failed = _meet(probe.failing(judged) or {}, tests) if judged.verdict == Verdict.FAIL else {}
        if failed:
            bad, bad_record = k, judged
        else:
            good, good_record = k, judged
    on_bisect(end, good, bad)
    found.culprit, found.culprit_record = bad - 1, bad_record
    found.culprit_tests, found.order_dependent = dict(tests), True
    return bad - 1, good_record


def _new(
    found: Found, tip: str, head: str, fails: Tests, by: ByTests
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """What of `fails` is neither the head's own failure nor a known flake (steps
    1-2): those that fail alone on the tip, and those that passed alone there."""
    probe, regressions, confirm, red = by.probe, by.regressions, by.confirm, by.red or {}
    new = minus(minus(fails, found.pre_existing), found.flaky)
    if regressions and (asked := _known(new, probe, head)):
        judged = probe.subset(head, asked, first=False, why="head", landed=True)
        on_head = _failed(probe, judged, asked)
        if confirm and (doubt := minus(on_head, red)):
            # Failing on the head once is no proof that the head fails it: run again
            # there, a test that passes now is flaky, not the head's own failure.
            judged = probe.subset(head, doubt, first=False, why="head again", landed=True)
            again = _failed(probe, judged, doubt)
            flaked = passed_again(doubt, again)
            found.flaky = union(found.flaky, flaked)
            on_head = minus(on_head, flaked)
        found.pre_existing = union(found.pre_existing, on_head)
        new = minus(minus(new, on_head), found.flaky)
    passed: dict[str, frozenset[str]] = {}
    if new and confirm and (asked := _known(new, probe, head)):
        again = _failed(probe, probe.subset(tip, asked, first=False, why="rerun"), asked)
        passed = passed_again(asked, again)
        new = minus(new, passed)
        passed = union(passed, _doubted(probe, tip, _meet(new, again)))
        new = minus(new, passed)
    return new, passed


def _doubted(probe: Probe, tip: str, failed: Tests) -> dict[str, frozenset[str]]:
    """Of `failed` (they failed alone on the tip too), those seen flipping on some
    tree before that pass alone in one of `_ALONE - 1` more runs: a flake may fail
    twice, and only a failure that holds may blame anyone."""
    doubt = {
        lane: frozenset(t for t in ids if probe.flakiness(lane, t)) for lane, ids in failed.items()
    }
    left = {lane: ids for lane, ids in doubt.items() if ids}
    passed: dict[str, frozenset[str]] = {}
    for _ in range(_ALONE - 1):
        if not left:
            break
        judged = probe.subset(tip, left, first=False, why="alone again")
        still = _failed(probe, judged, left)
        passed = union(passed, passed_again(left, still))
        left = _meet(still, left)
    return passed


def _least_flaky(tests: Tests, probe: Probe) -> dict[str, frozenset[str]]:
    """One test of `tests`: the one that flipped least on landed trees (a flake
    among them cannot move the blame)."""
    pairs = sorted((probe.flakiness(lane, t), lane, t) for lane, ids in tests.items() for t in ids)
    _n, lane, test = pairs[0]
    return {lane: frozenset({test})}


def _bisect(
    commits: list[str],
    new: Tests,
    probe: Probe,
    record: Judged,
    on_bisect: Callable[[int, int, int], None],
) -> tuple[int, Judged]:
    """The culprit's index among `commits` (whose last fails `new`), by running one
    of `new` (the least flaky) on the prefixes, and the run that failed at the
    culprit."""
    end = len(commits)
    one = _least_flaky(new, probe)
    bad, bad_record, good = end, record, 0
    while bad - good > 1:
        on_bisect(end, good, bad)
        k = (good + bad) // 2
        there = _known(one, probe, commits[k - 1])  # a test a later task adds
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
