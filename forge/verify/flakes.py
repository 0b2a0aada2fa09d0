"""When a failing lane is run again: only when its failure could be a flake.

A verification reruns a failing lane (only that lane) up to `verify_reruns` times,
and a later pass makes it FLAKY. The gate judges many commits of one batch that
fail for the same reason, so it asks more of a rerun (`Confirm`):

- a failure is confirmed once: a rerun that fails the same tests again (the same
  lane, when its log names no tests) confirms it, and no further rerun is made;
- a failure whose failing tests are the same as one already confirmed in this
  batch is not rerun at all (a bisection step that fails as the batch did);
- a failure of a test that does not exist on the integration head is not rerun:
  a new test cannot be a known flake;
- none of this holds for a failing test with a flaky history (it passed and
  failed on one tree, forge/verify/testdb.py), nor for a rerun in which some test
  that failed before passed: it gets every rerun.

The flake-evidence rule itself (a test that failed on a tree and passed when run
again on that same tree is flaky) is `passed_again`, which the gate's reruns of
some tests (forge/run/gate/by_tests.py, forge/run/gate/subsets.py) use too; the
history keeps the same rule over every run it holds.

Anything else fails again only after its reruns, so a flake still never ejects
anyone. The failing test ids of a lane are a set of strings, empty when unknown.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from forge.frozen import frozen
from forge.git.repo import Repository
from forge.verify.records import LaneRun

# a failed run of a lane -> the ids of the tests that failed (empty: unknown)
TestsOf = Callable[[LaneRun], frozenset[str]]
Tests = Mapping[str, frozenset[str]]  # lane -> test ids


def passed_again(failed: Tests, again: Tests) -> dict[str, frozenset[str]]:
    """The flake-evidence rule: of the tests that `failed` on a tree, those that did
    not fail when run `again` on the same tree both passed and failed there, so they
    are flaky (by lane). `again` must be a run of at least those tests."""
    out = {lane: ids - again.get(lane, frozenset()) for lane, ids in failed.items()}
    return {lane: ids for lane, ids in out.items() if ids}


class Reruns(Protocol):
    def again(self, lane: str, runs: Sequence[LaneRun]) -> bool:
        """Whether the lane, whose runs so far all failed, runs again."""
        ...


@frozen
class Fixed:
    """Up to `reruns` reruns, whatever failed (a verification outside the gate)."""

    reruns: int

    def again(self, lane: str, runs: Sequence[LaneRun]) -> bool:  # noqa: ARG002 - the protocol's
        return len(runs) <= self.reruns


@frozen
class Once:
    """Up to `reruns` reruns, until one fails as the run before it did (the same
    failing tests; the same lane when its log names none): confirmed, as the gate
    confirms (a verification outside the gate: `forge verify`, the hooks)."""

    reruns: int

    def again(self, lane: str, runs: Sequence[LaneRun]) -> bool:  # noqa: ARG002 - the protocol's
        if len(runs) > self.reruns:
            return False
        return len(runs) < 2 or failing_tests(runs[-1]) != failing_tests(runs[-2])


@dataclass
class Confirm:
    """The gate's rule for one batch (see the module's docstring)."""

    reruns: int
    tests_of: TestsOf
    is_new: Callable[[str], bool] = lambda _test: False
    # (lane, failing tests) -> whether any of them has a flaky history: then no
    # failure of theirs is confirmed early (every rerun is made).
    was_flaky: Callable[[str, frozenset[str]], bool] = lambda _lane, _tests: False
    confirmed: set[tuple[str, frozenset[str]]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def again(self, lane: str, runs: Sequence[LaneRun]) -> bool:
        tests = self.tests_of(runs[-1])
        before = self.tests_of(runs[-2]) if len(runs) >= 2 else None
        flaked = before is not None and passed_again({lane: before}, {lane: tests})
        if tests and (flaked or self.was_flaky(lane, tests)):
            return len(runs) <= self.reruns
        key = (lane, tests)
        with self._lock:
            if key in self.confirmed:
                return False
        reproduced = before == tests
        new = any(self.is_new(t) for t in sorted(tests)[:MAX_LOOKED_UP])
        if reproduced or len(runs) > self.reruns or new:
            with self._lock:
                self.confirmed.add(key)
            return False
        return True


MAX_LOOKED_UP = 20  # failing tests looked up on the integration head, at most


def failing_tests(run: LaneRun) -> frozenset[str]:
    """The tests a failed run's log names (forge/verify/failures.py); empty when it
    names none."""
    return frozenset(f.test for f in run.failures if f.test)


_SOURCE = re.compile(r"\.(py|js|jsx|ts|tsx|mjs|cjs|go|rs|rb|java|kt|cs|php)$")


def exists_at(repo: Repository, commit: str, test: str) -> bool:
    """Whether the test `test` (an id such as `tests/test_a.py::test_b[1]`,
    `TestB`, `mod::tests::b`) is found in the tree of `commit`: its file, when the
    id names one, and its name as a word in it."""
    parts = [p for p in re.split(r"::| ", test) if p]
    path = parts[0] if parts and _SOURCE.search(parts[0]) else None
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"\[.*$", "", parts[-1] if parts else ""))
    if path is not None and repo.try_git("cat-file", "-e", f"{commit}:{path}").returncode != 0:
        return False
    if not names:
        return True  # nothing to look for: assume it is known
    where = ["--", path] if path is not None else []
    found = repo.try_git("grep", "-q", "-w", "-F", "-e", names[-1], commit, *where)
    return found.returncode == 0
