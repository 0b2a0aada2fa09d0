"""A lane that failed for want of the network: in the sandbox a lane has none
unless it says `network = true`, and a test suite that downloads, or talks to a
service, fails with words that read like a bug. Its log's tail is read for the
words a refused connection or a failed name lookup leaves, so the failure is named
for what it is."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from forge.verify.records import LaneResult, Verdict

SAID = "no network in the sandbox (`network = true` gives it)"
_TAIL = 64 * 1024  # bytes of the log read from its end
_OFFLINE = re.compile(
    r"Connection refused|Network is unreachable|Temporary failure in name resolution"
    r"|Name or service not known|Could not resolve host|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)"
    r"|nodename nor servname|No address associated with hostname|ECONNREFUSED|ENETUNREACH",
)


def said_offline(log: Path) -> bool:
    """Whether the end of `log` holds a refused connection or a failed name lookup."""
    try:
        with log.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return False
    return _OFFLINE.search(tail) is not None


def say(result: LaneResult, emit: Callable[[str], None], *, cut_off: bool) -> None:
    """Name a failed lane that had no network (`cut_off`) for what it is, when its
    last run's log shows a refused connection or a failed name lookup."""
    failed = result.verdict == Verdict.FAIL and cut_off and bool(result.runs)
    if failed and said_offline(Path(result.runs[-1].log)):
        emit(f"lane {result.name}: {SAID}")
