"""Where forge's output goes: a file written only where a regular file belongs, and
standard streams that a closed descriptor or a broken pipe cannot turn into a
traceback.

A page written with `-o PATH` goes to a temp file beside PATH, renamed over it: a
directory, device, FIFO or socket at PATH is refused and left as it was (a rename
would replace `/dev/null` with a file). A closed standard output is given
`/dev/null` (a file forge opens must never land on descriptor 1); a reader that
goes away (`forge status | head -1`) silences it, as git does, and the command
carries on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from forge.errors import ForgeError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def not_a_file(path: Path) -> str | None:
    """What `path` is when it exists and is not a regular file (a link is followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    for test, what in _KINDS:
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def write_text(path: Path, text: str) -> None:
    """Write `text` to the regular file `path` (made or replaced whole), or raise a
    one-line ForgeError, leaving whatever is at `path` as it was."""
    what = not_a_file(path)
    if what is not None:
        raise ForgeError(f"{path} is {what}: give the path of a file to write")
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ForgeError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def open_closed_standard_fds() -> None:
    """Give a closed descriptor 0, 1 or 2 `/dev/null`, so no file forge opens takes
    its place (and a child writing to its stdout writes into it)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the process


def is_broken_pipe(exc: OSError) -> bool:
    return isinstance(exc, BrokenPipeError) or exc.errno in (errno.EPIPE, errno.EBADF)


def silence(fileno: int) -> None:
    """The reader of `fileno` went away: what is still written there goes nowhere
    (also Python's own flush at exit, which would otherwise print a traceback)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fileno)
        os.close(null)
