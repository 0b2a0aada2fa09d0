"""Several verifications at once (bisection under `verify_parallel`, the best-of-N
candidates merged onto the integration head): each on a thread, up to a width at
once, the results in order, the first error raised on the caller's thread once
every started one has ended (none is started after an error)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

R = TypeVar("R")
T = TypeVar("T")


def each(
    work: Callable[[T], R], items: Sequence[T], *, width: int | None = None, name: str
) -> list[R]:
    """`work(item)` for every item, up to `width` at once (all of them when None),
    on threads named `name<i>`."""
    done: dict[int, R] = {}
    errors: list[BaseException] = []
    todo = iter(range(len(items)))
    lock = threading.Lock()

    def run() -> None:
        while not errors:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                done[i] = work(items[i])
            except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread below
                errors.append(exc)

    count = len(items) if width is None else max(1, min(width, len(items)))
    threads = [threading.Thread(target=run, name=f"{name}{i}", daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():  # a timed join stays responsive to signals
            t.join(0.1)
    if errors:
        raise errors[0]
    return [done[i] for i in range(len(items))]


def at_once(judge: Callable[[str, str], R], commits: Sequence[str], keys: Sequence[str]) -> list[R]:
    """`judge(commit, key)` for each commit with its key, all at once."""
    return each(lambda i: judge(commits[i], keys[i]), range(len(commits)), name="gate-bisect")
