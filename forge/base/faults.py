"""Fault injection for tests: FORGE_FAULT=<point> makes forge kill itself with
SIGKILL when it reaches that point, so tests can prove a crash anywhere loses
nothing. FORGE_FAULT=<point>@<n> fires at the n-th time the point is reached.

A suffix chooses another fault: `:error` raises an unexpected exception (a bug),
`:interrupt` raises KeyboardInterrupt and `:exit` SystemExit, on whatever thread
reached the point (`after-agent:error`, `before-merge@2:interrupt`)."""

from __future__ import annotations

import os
import signal
import threading

_counts: dict[str, int] = {}
_lock = threading.Lock()


class InjectedFault(RuntimeError):
    """The unexpected exception `:error` raises."""


def point(name: str) -> None:
    spec = os.environ.get("FORGE_FAULT")
    if not spec:
        return
    spec, _, how = spec.partition(":")
    want, _, nth = spec.partition("@")
    if want != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        hit = _counts[name] == (int(nth) if nth else 1)
    if not hit:
        return
    if how == "error":
        raise InjectedFault(f"injected fault at {name}")
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "exit":
        raise SystemExit(f"injected exit at {name}")
    os.kill(os.getpid(), signal.SIGKILL)
