"""Several verifications at once (bisection under `verify_parallel`): each on a
thread of its own, the results in order, the first error raised on the caller's
thread once every one has ended."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

R = TypeVar("R")


def at_once(judge: Callable[[str, str], R], commits: Sequence[str], keys: Sequence[str]) -> list[R]:
    """`judge(commit, key)` for each commit with its key, all at once."""
    done: dict[int, R] = {}
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            done[i] = judge(commits[i], keys[i])
        except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread below
            errors.append(exc)

    threads = [
        threading.Thread(target=one, args=(i,), name=f"gate-bisect{i}", daemon=True)
        for i in range(len(commits))
    ]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():  # a timed join stays responsive to signals
            t.join(0.1)
    if errors:
        raise errors[0]
    return [done[i] for i in range(len(commits))]
