"""A log as `forge serve` sends it: only a regular file inside forge's own folders
(the repository's `.git/forge/`: plans' records and logs, verification records),
resolved first so no `..` or link leads out; its last `CAP` bytes at most."""

from __future__ import annotations

import os
from pathlib import Path

CAP = 1 << 20  # bytes of a log sent (its tail: where a failure is)


def confined(root: Path, asked: str) -> Path | None:
    """The file `asked` names when it is a regular file under `root` (None: not one)."""
    if not asked or "\0" in asked:
        return None
    try:
        path = Path(asked).resolve(strict=True)
        base = root.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not path.is_relative_to(base) or not path.is_file():
        return None
    return path


def tail(path: Path, cap: int = CAP) -> bytes:
    """The file's last `cap` bytes, after a line saying what was left out."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= cap:
            return fh.read()
        fh.seek(size - cap)
        body = fh.read(cap)
    said = f"forge: the first {size - cap} of {size} bytes are left out; the last {cap} follow\n"
    return said.encode() + body
