"""Reading logs back: only their tail, so forge's memory stays bounded whatever a
task printed (the reason of a failure is at the end of its log)."""

from __future__ import annotations

import os
from pathlib import Path

TAIL_BYTES = 64 * 1024  # enough for the last lines of any failure
ANALYSIS_BYTES = 1024 * 1024  # what is searched for usage and provider errors


def tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of the file at `path` as text (a first line cut in
    the middle is dropped); "" when the file does not exist."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = max(0, size - limit)
            fh.seek(start)
            data = fh.read(limit)
    except FileNotFoundError:
        return ""
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else data
    return data.decode("utf-8", errors="replace")
