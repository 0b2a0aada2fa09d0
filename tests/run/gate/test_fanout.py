"""The gate's fan-out (forge/run/gate/fanout.py): up to a width at once, the results
in order, the first error raised once every started one has ended."""

from __future__ import annotations

import threading

import pytest

from forge.run.gate import fanout


def test_no_more_than_width_run_at_once_and_results_keep_their_order() -> None:
    lock = threading.Lock()
    running, most = 0, 0
    both = threading.Barrier(2, timeout=10)

    def work(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        both.wait()  # two at once, or the barrier breaks
        with lock:
            running -= 1
        return n * n

    assert fanout.each(work, [1, 2, 3, 4, 5, 6], width=2, name="t") == [1, 4, 9, 16, 25, 36]
    assert most == 2


def test_the_first_error_is_raised_and_no_item_starts_after_it() -> None:
    started: list[int] = []

    def work(n: int) -> int:
        started.append(n)
        if n == 2:
            raise ValueError("two")
        return n

    with pytest.raises(ValueError, match="two"):
        fanout.each(work, [1, 2, 3, 4], width=1, name="t")
    assert started == [1, 2]


def test_at_once_hands_each_commit_its_key() -> None:
    got = fanout.at_once(lambda c, k: f"{c}@{k}", ["a", "b", "c"], ["x", "y", "z"])
    assert got == ["a@x", "b@y", "c@z"]
