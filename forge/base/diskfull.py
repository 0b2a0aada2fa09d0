"""A full disk (or a spent quota) is nobody's failure: the run pauses (exit 8),
naming the folder it could not write and the space left there, and the next run
resumes where this one stopped."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from forge.base.proc import CommandError
from forge.errors import ExitCode, ForgeError

_FULL = (errno.ENOSPC, errno.EDQUOT)
# What git and other tools print when a write found no space.
_SAID = ("No space left on device", "Out of diskspace", "Disk quota exceeded")


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in out:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def is_full(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is a write refused for want of space: an
    OSError's number, or a command's output saying so."""
    for seen in _chain(exc):
        if isinstance(seen, OSError) and seen.errno in _FULL:
            return True
        if isinstance(seen, CommandError) and any(said in seen.output for said in _SAID):
            return True
    return False


class DiskFull(ForgeError):
    """The pause a full disk makes: one line, exit 8."""

    def __init__(
        self, exc: BaseException, *, resume: str = "the same command", where: Path | None = None
    ) -> None:
        where = _where(exc) or where
        free = _free(where) if where is not None else None
        place = f" in {where}" if where is not None else ""
        left = f" ({_size(free)} free there)" if free is not None else ""
        super().__init__(
            f"paused: no space left on the device{place}{left}: free some space "
            f"(a few hundred MB), then run {resume} again; it goes on where it stopped",
            code=ExitCode.PAUSED,
        )


def _where(exc: BaseException) -> Path | None:
    """The folder the refused write was for: the file's, or the command's."""
    for seen in _chain(exc):
        if isinstance(seen, OSError) and seen.filename:
            path = Path(os.fsdecode(seen.filename))
            return path if path.is_dir() else path.parent
        if isinstance(seen, CommandError):
            return seen.cwd
    return None


def _free(where: Path) -> int | None:
    for folder in (where, *where.parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def _size(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KB", "MB"):
        if value < 1024:
            return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
