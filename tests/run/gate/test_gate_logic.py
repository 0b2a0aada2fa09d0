"""The gate's pure logic (forge/run/gate/bisection.py), exhaustively over small chains: the
bisection names the first failing prefix's last task within ceil(log2 N) probes,
whatever the failing pattern, and a batch lands exactly the prefix that passed."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from forge.run.gate import bisection as gate
from forge.verify.records import Verdict


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    commit: str


def _culprit(size: int, passes: Callable[[int], bool]) -> tuple[int, list[int]]:
    """The culprit `run_batch` names in a failed chain of `size` steps whose prefix k
    passes when `passes(k)`, and the prefixes its bisection judged (the tip and the
    head's own check aside)."""
    judged: list[int] = []

    def judge(commit: str) -> Judged:
        judged.append(int(commit))
        return Judged(Verdict.PASS if passes(int(commit)) else Verdict.FAIL, commit)

    chain = gate.Chain(tuple(gate.Step(f"t{k}", str(k)) for k in range(1, size + 1)))
    tasks = [s.task for s in chain.steps]
    out = gate.run_batch(tasks, head="0", build=lambda _names: chain, judges=gate.Judges(judge))
    assert out.culprit is not None and judged[0] == size
    return int(out.culprit.commit) - 1, [k for k in judged[1:] if k != 0]


def test_bisect_finds_the_first_failing_prefix_for_every_pattern() -> None:
    for size in range(1, 11):
        # Every monotone pattern (prefixes from k on fail): the culprit is k - 1.
        for first_bad in range(1, size + 1):
            culprit, probes = _culprit(size, range(first_bad).__contains__)
            assert culprit == first_bad - 1
            assert len(probes) <= math.ceil(math.log2(size)) if size > 1 else not probes
            assert len(set(probes)) == len(probes), "a prefix judged twice"


def test_bisect_on_any_pattern_names_a_pass_fail_boundary() -> None:
    """Failures need not be monotone (a pair that breaks only together, and a later
    task that fixes it): the answer is still a prefix that passed followed by one
    that failed, so what lands passed."""
    for size in range(1, 8):
        for pattern in itertools.product([True, False], repeat=size - 1):
            ok = [True, *pattern, False]  # prefix 0 passes, the whole chain fails
            culprit, _ = _culprit(size, ok.__getitem__)
            assert ok[culprit] and not ok[culprit + 1]


def test_bisection_counts_what_is_left() -> None:
    search = gate.Bisection(16)
    assert search.rounds(1) == 4
    search.record(8, True)
    assert search.rounds(1) == 3
    search.record(12, False)
    assert (search.good, search.bad, search.rounds(1)) == (8, 12, 2)


def _run(
    tasks: Sequence[str],
    bad: set[frozenset[str]],
    *,
    conflicts: Sequence[str] = (),
    head_ok: bool = True,
    interrupt_at: int | None = None,
) -> tuple[gate.Outcome, list[str]]:
    """A batch over a fake repository: a commit is the set of tasks merged in it; it
    fails when it holds every task of one of the `bad` groups."""
    judged: list[str] = []

    def build(names: Sequence[str]) -> gate.Chain:
        merged: list[str] = []
        steps = []
        for name in names:
            if name in conflicts:
                continue
            merged.append(name)
            steps.append(gate.Step(name, "+".join(merged)))
        return gate.Chain(tuple(steps), {c: ("x",) for c in conflicts if c in names})

    def judge(commit: str) -> Judged:
        judged.append(commit)
        if interrupt_at is not None and len(judged) == interrupt_at:
            return Judged(Verdict.INTERRUPTED, commit)
        if commit == "head":
            return Judged(Verdict.PASS if head_ok else Verdict.FAIL, commit)
        held = set(commit.split("+"))
        failed = any(group <= held for group in bad)
        return Judged(Verdict.FAIL if failed else Verdict.PASS, commit)

    return gate.run_batch(tasks, head="head", build=build, judges=gate.Judges(judge)), judged


def test_a_passing_batch_lands_whole_with_one_verification() -> None:
    out, judged = _run(list("abcd"), set())
    assert [s.task for s in out.landed] == list("abcd")
    assert out.tip == "a+b+c+d" and judged == ["a+b+c+d"]
    assert out.culprit is None and not out.requeue


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 16])
def test_one_culprit_among_n(n: int) -> None:
    tasks = [f"t{i}" for i in range(n)]
    for c in range(n):
        out, judged = _run(tasks, {frozenset([tasks[c]])})
        assert out.culprit is not None and out.culprit.task == tasks[c]
        assert [s.task for s in out.landed] == tasks[:c]
        assert out.requeue == tasks[c + 1 :]
        # the tip, the probes, and the head only when the culprit is first
        assert len(judged) <= 1 + math.ceil(math.log2(n)) + (c == 0)
        assert out.culprit_record is not None and out.culprit_record.verdict == Verdict.FAIL


def test_a_pair_blames_the_later_task() -> None:
    out, _ = _run(list("abcdef"), {frozenset("be")})
    assert out.culprit is not None and out.culprit.task == "e"
    assert [s.task for s in out.landed] == list("abcd")
    assert out.requeue == ["f"]


def test_conflicts_are_left_out_of_the_chain() -> None:
    out, judged = _run(list("abc"), set(), conflicts=["b"])
    assert list(out.chain.conflicts) == ["b"]
    assert [s.task for s in out.landed] == ["a", "c"] and judged == ["a+c"]


def test_a_head_that_fails_on_its_own_blames_nobody() -> None:
    out, _ = _run(list("abc"), {frozenset()}, head_ok=False)
    assert out.broken_head is not None
    assert out.culprit is None and not out.landed


@pytest.mark.parametrize("at", [1, 2, 3])
def test_an_interrupted_verification_lands_nothing(at: int) -> None:
    out, _ = _run(list("abcdefgh"), {frozenset("f")}, interrupt_at=at)
    assert out.interrupted
    assert not out.landed and out.culprit is None


def test_take_batch() -> None:
    assert gate.take_batch(list("abcde"), mode="queue", batch_max=2) == ["a", "b"]
    assert gate.take_batch(list("abcde"), mode="end", batch_max=2) == list("abcde")


@pytest.mark.parametrize("width", [2, 3, 4])
def test_parallel_bisection_names_a_boundary_in_fewer_rounds(width: int) -> None:
    """Up to `width` prefixes judged at once: on any pattern the answer is a prefix
    that passed followed by one that failed, in ceil(log_(width+1) N) rounds."""
    for size in range(1, 9):
        for pattern in itertools.product([True, False], repeat=size - 1):
            ok = [True, *pattern, False]
            search = gate.Bisection(size)
            rounds = 0
            while probes := search.probes(width):
                assert len(probes) <= width and all(search.good < k < search.bad for k in probes)
                search.record_all({k: ok[k] for k in probes})
                rounds += 1
            assert ok[search.culprit] and not ok[search.culprit + 1]
            bound = gate.Bisection(size).rounds(width)
            assert rounds <= bound and (width + 1) ** bound < size * (width + 1)


def test_run_batch_judges_prefixes_at_once() -> None:
    tasks = [f"t{i}" for i in range(16)]
    rounds: list[list[str]] = []

    def build(names: Sequence[str]) -> gate.Chain:
        return gate.Chain(
            tuple(gate.Step(n, "+".join(names[: i + 1])) for i, n in enumerate(names))
        )

    def judge(commit: str) -> Judged:
        return Judged(Verdict.FAIL if "t11" in commit.split("+") else Verdict.PASS, commit)

    def many(commits: Sequence[str]) -> list[Judged]:
        rounds.append(list(commits))
        return [judge(c) for c in commits]

    judges = gate.Judges(judge, many=many, width=3)
    out = gate.run_batch(tasks, head="head", build=build, judges=judges)
    assert out.culprit is not None and out.culprit.task == "t11"
    assert [s.task for s in out.landed] == tasks[:11]
    assert len(rounds) == 2 and all(len(r) <= 3 for r in rounds)  # log4(16)


def test_the_batch_window_halves_after_a_culprit_and_grows_by_one_after_a_pass() -> None:
    window = gate.Window(8)
    assert window.size == 8
    window.failed()
    window.failed()
    assert window.size == 2
    window.failed()
    window.failed()
    assert window.size == 1
    for _ in range(10):
        window.passed()
    assert window.size == 8
