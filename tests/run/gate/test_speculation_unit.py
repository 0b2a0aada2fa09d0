"""The speculator's bookkeeping with stand-ins for git and the verification: which
batch a speculation is built for, on which base, and when it is thrown away."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from helpers.runkit import wait_for

from forge.base.interrupt import LinkedStop
from forge.run.gate import bisection as gate
from forge.run.gate.speculation import Speculator
from forge.verify.records import Verdict, VerifyRecord


def record(commit: str, verdict: Verdict) -> VerifyRecord:
    return VerifyRecord(
        id=commit,
        key="k",
        commit=commit,
        tree=commit,
        config_hash="",
        verdict=verdict,
        lanes=(),
        started="",
        duration=0.0,
    )


class Stand:
    """Commits are strings: a chain step's commit is `base+task`, a tree its commit."""

    def __init__(self, *, width: int, hold: bool = False) -> None:
        self.stop = threading.Event()
        self.hold = hold  # verifications run until they are stopped
        self.keys: list[str] = []
        self.spec = Speculator(
            width=width,
            key="p",
            stop=self.stop,
            build=self.build,
            verify=self.verify,
            tree_of=lambda commit: commit,
        )

    def build(self, base: str, tasks: Sequence[str]) -> gate.Chain:
        steps, tip = [], base
        for task in tasks:
            tip = f"{tip}+{task}"
            steps.append(gate.Step(task, tip))
        return gate.Chain(tuple(steps))

    def verify(self, commit: str, key: str, stop: threading.Event) -> VerifyRecord:
        self.keys.append(key)
        if self.hold:
            while not stop.wait(0.01):
                pass
            return record(commit, Verdict.INTERRUPTED)
        return record(commit, Verdict.FAIL if "bad" in commit else Verdict.PASS)


def test_the_next_batch_is_judged_on_the_candidate_and_answers_for_it() -> None:
    s = Stand(width=2)
    s.spec.top_up("H+a", ["b", "c", "d"], batch_max=2)
    assert s.spec.take("H+a", ["b", "c", "d"]) == ["b", "c"]
    answer = s.spec.answer("H+a+b+c")
    assert answer is not None and answer.verdict == Verdict.PASS
    assert s.spec.answer("H+a+b") is None  # a bisection probe: not what it judged
    assert s.keys == ["p.spec1"]
    s.spec.close()


def test_a_speculation_on_a_candidate_that_did_not_land_is_thrown_away() -> None:
    s = Stand(width=3, hold=True)
    s.spec.top_up("H+a", ["b", "c"], batch_max=1)
    wait_for(lambda: len(s.keys) == 2, what="both speculations verifying")
    assert s.spec.take("H", ["b", "c"]) is None  # the head is not its base: `a` did not land
    s.spec.close()  # returns: the discarded verifications were stopped
    assert s.spec.answer("H+a+b") is None
    assert sorted(s.keys) == ["p.spec1", "p.spec2"]  # running at once: checkouts of their own


def test_a_failed_candidate_gets_nothing_built_on_it() -> None:
    s = Stand(width=2)
    s.spec.discard("H+a")
    s.spec.top_up("H+a", ["b"], batch_max=1)
    assert s.spec.started == 0 and s.spec.take("H+a", ["b"]) is None


def test_a_failing_speculation_answers_fail_and_width_one_never_speculates() -> None:
    s = Stand(width=3)
    s.spec.top_up("H+a", ["bad", "c", "d"], batch_max=1)
    assert s.spec.started == 2  # one on the other: H+a+bad, then H+a+bad+c
    assert s.spec.take("H+a", ["bad", "c", "d"]) == ["bad"]
    answer = s.spec.answer("H+a+bad")
    assert answer is not None and answer.verdict == Verdict.FAIL
    s.spec.close()
    assert len(s.keys) == 2
    one = Stand(width=1)
    one.spec.top_up("H+a", ["b"], batch_max=1)
    assert one.spec.started == 0


def test_only_full_batches_are_judged_ahead() -> None:
    s = Stand(width=2)
    s.spec.top_up("H+a", ["b"], batch_max=2)  # a serial gate might take more than `b`
    assert s.spec.started == 0
    s.spec.top_up("H+a", ["b", "c"], batch_max=2)
    assert s.spec.started == 1
    s.spec.close()


def test_the_runs_stop_reaches_a_speculation() -> None:
    parent = threading.Event()
    linked = LinkedStop(parent)
    assert not linked.is_set()
    parent.set()
    assert linked.is_set()
