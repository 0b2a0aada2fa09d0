"""Fault injection for tests: FORGE_FAULT=<point> makes forge kill itself with
SIGKILL when it reaches that point, so tests can prove a crash anywhere loses
nothing. FORGE_FAULT=<point>@<n> fires at the n-th time the point is reached."""

from __future__ import annotations

import os
import signal
import threading

_counts: dict[str, int] = {}
_lock = threading.Lock()


def point(name: str) -> None:
    spec = os.environ.get("FORGE_FAULT")
    if not spec:
        return
    want, _, nth = spec.partition("@")
    if want != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        hit = _counts[name] == (int(nth) if nth else 1)
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)
