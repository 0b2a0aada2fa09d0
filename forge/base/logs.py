"""Logs: written capped (a command's output, see `Drain`), read back only by their
tail, so neither the disk nor forge's memory grows with whatever a task printed
(the reason of a failure is at the end of its log)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import BinaryIO

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


# A log is capped where it is written: a task printing without end must neither
# fill the disk nor, read back later, forge's memory. FORGE_LOG_CAP overrides.
DEFAULT_LOG_CAP = 50 * 1024 * 1024
LOG_CAP_VAR = "FORGE_LOG_CAP"
_CHUNK = 64 * 1024


def log_cap(override: int | None = None) -> int:
    """Bytes of one command's output kept in its log: `override` (a plan's
    `log_cap`), else FORGE_LOG_CAP (bytes, or with a K, M or G suffix), else 50 MB."""
    if override is not None:
        return override
    raw = os.environ.get(LOG_CAP_VAR, "").strip()
    return parse_size(raw) if raw else DEFAULT_LOG_CAP


def parse_size(text: object) -> int:
    """Bytes from 1048576, "64K", "50M", "1G" (powers of 1024; a trailing B allowed).
    ValueError for anything else, zero or less included."""
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as 50M, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        t = str(text).strip().upper().removesuffix("B")
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
        digits = t[:-1] if scale > 1 else t
        try:
            value = int(float(digits) * scale)
        except (ValueError, OverflowError):  # OverflowError: inf; nan is a ValueError
            raise ValueError(f"expected a size such as 50M, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"a size must be more than zero, got {text!r}")
    return value


class Drain(threading.Thread):
    """Copies a child's output from a pipe to its log, up to `cap` bytes; the rest
    is read and dropped (so the child never blocks on a full pipe), with a marker
    line where the cut was made and the count at the end. Memory: one chunk."""

    def __init__(self, fd: int, path: Path, cap: int) -> None:
        super().__init__(name=f"drain-{path.name}", daemon=True)
        self.fd = fd
        self.path = path
        self.cap = cap
        self.dropped = 0
        # When the child last wrote (wall clock): a printed "retry in 60s" counts
        # from then, not from forge's own lines after a timeout.
        self.last_output: float | None = None

    def run(self) -> None:
        try:
            with self.path.open("ab", buffering=0) as out:
                self._copy(out)
        except OSError:
            # The log cannot be written (a full disk): the output is still read, so
            # the child never blocks on a full pipe; what forge does next says why.
            with contextlib.suppress(OSError):
                while os.read(self.fd, _CHUNK):
                    self.last_output = time.time()
        finally:
            os.close(self.fd)

    def _copy(self, out: BinaryIO) -> None:
        written = 0
        while chunk := os.read(self.fd, _CHUNK):
            self.last_output = time.time()
            keep = chunk[: max(0, self.cap - written)]
            if keep:
                out.write(keep)
                written += len(keep)
            if len(keep) < len(chunk):
                if not self.dropped:
                    out.write(
                        f"\nforge: log cap of {self.cap} bytes reached; "
                        f"the rest of the output is dropped\n".encode()
                    )
                self.dropped += len(chunk) - len(keep)
        if self.dropped:
            out.write(f"forge: {self.dropped} bytes of output dropped\n".encode())


def append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line.rstrip("\n") + "\n")
