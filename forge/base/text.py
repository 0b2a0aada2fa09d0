"""Text for people. Text from tasks is data: what forge prints never carries a task's
terminal control; and aligned tables fit for a terminal, a log or a pipe.

A task's output, reason or file name may hold `\\033]0;TITLE\\007` (a command to the
terminal) or `[bold]` (markup to rich). Everything forge prints goes through
`printable`; rich is given `Text` objects, never markup strings. Logs on disk stay
as the task wrote them.

Output goes only where it belongs. A page written with `-o PATH` goes to a temp
file beside PATH, renamed over it: a directory, device, FIFO or socket at PATH is
refused and left as it was (a rename would replace `/dev/null` with a file). A
closed standard output is given `/dev/null` (a file forge opens must never land
on descriptor 1); a reader that goes away (`forge status | head -1`) silences it,
as git does, and the command carries on.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from forge.errors import ForgeError

# C0 controls but newline and tab, DEL, and the C1 controls (U+0080-U+009F: a
# terminal may take U+009B as CSI, the start of an escape sequence).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# In a one-line place (a path in a message, a table cell) newline and tab too.
_CONTROL_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# A byte of a file name that is not UTF-8, as Python reads it (surrogateescape):
# shown as git shows it, `\377`, and never an error when written out.
_RAW_BYTE = re.compile("[\udc80-\udcff]")


def _octal(m: re.Match[str]) -> str:
    return f"\\{ord(m.group()) - 0xDC00:03o}"


def bytes_shown(text: str) -> str:
    """`text` with each byte that is not UTF-8 (a surrogate escape) as `\\ooo`."""
    return _RAW_BYTE.sub(_octal, text)


def _caret(m: re.Match[str]) -> str:
    ch = m.group()
    code = ord(ch)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # ESC -> ^[, BEL -> ^G, as `cat -v` shows them
    if code == 0x7F:
        return "^?"
    return "\ufffd"


def printable(text: str) -> str:
    """`text` with every control character but newline and tab made visible
    (`\\x1b` -> `^[`): safe to write to a terminal."""
    return _CONTROL.sub(_caret, bytes_shown(text))


def _in_line(m: re.Match[str]) -> str:
    return _NAMED.get(m.group()) or _caret(m)


def one_line(text: str) -> str:
    """`text` on one line, every control character visible (newline -> `\\n`): for a
    file name in a message or a cell of a table."""
    return _CONTROL_IN_LINE.sub(_in_line, bytes_shown(text))


class PrintableStream(io.TextIOBase):
    """A text stream that writes `printable(text)` to the stream it wraps. `raw` is
    the wrapped stream, for a writer whose own control sequences are wanted (rich's
    live display, which is given only escaped text)."""

    def __init__(self, raw: TextIO, *, complain: bool = False) -> None:
        super().__init__()
        self.raw = raw
        self.complain = complain  # say once on stderr when writing here fails
        self.gone = False  # the reader went away (a broken pipe): writes go nowhere

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.raw.write(printable(text))
            except OSError as exc:
                self._lost(exc)
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.raw.flush()
            except OSError as exc:
                self._lost(exc)

    def _lost(self, exc: OSError) -> None:
        """The output cannot be written: a reader that went away, or a full disk
        (`> /dev/full`). The rest goes nowhere and the command carries on; a failure
        other than a closed pipe is said once, in one line, on stderr."""
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            silence(self.raw.fileno())
        if self.complain and not is_broken_pipe(exc):
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(
                    f"forge: cannot write to standard output ({exc.strerror or exc}); "
                    "the rest of it is dropped\n"
                )

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8") or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.raw, "errors", None)


def raw_stream(stream: TextIO) -> TextIO:
    """The stream beneath a PrintableStream (or `stream` itself)."""
    raw = getattr(stream, "raw", None)
    return raw if raw is not None and isinstance(stream, PrintableStream) else stream


def usd(value: float, places: int = 2) -> str:
    """`$1.23` (`places` decimals); a real cost under a cent with two significant
    digits (`$0.00015`), so a small spend never reads as free."""
    if value == 0 or abs(value) >= 0.01:
        return f"${value:.{places}f}"
    return f"${value:.2g}" if abs(value) >= 1e-4 else f"${value:.6f}".rstrip("0")


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


# -- where output goes ---------------------------------------------------------------

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


def write_output_file(path: Path, text: str) -> None:
    """Write `text` to the regular file `path` (made or replaced whole), or raise a
    one-line ForgeError, leaving whatever is at `path` as it was."""
    what = not_a_file(path)
    if what is not None:
        raise ForgeError(f"{path} is {what}: give the path of a file to write")
    blocked = next((p for p in path.parents if os.path.lexists(p)), None)
    if blocked is not None and not blocked.is_dir():
        raise ForgeError(f"cannot write {path}: {blocked} is a file, not a folder")
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


def guard_standard_streams() -> None:
    """For the process: no closed descriptor 0-2 (`forge status >&-`: no traceback,
    no file on fd 1), and task text (reasons, file names, output) printed as data,
    no control character of it reaching the user's terminal whichever path prints it."""
    open_closed_standard_fds()
    if not isinstance(sys.stdout, PrintableStream):
        sys.stdout = PrintableStream(sys.stdout, complain=True)
    if not isinstance(sys.stderr, PrintableStream):
        sys.stderr = PrintableStream(sys.stderr)


def is_broken_pipe(exc: OSError) -> bool:
    return isinstance(exc, BrokenPipeError) or exc.errno in (errno.EPIPE, errno.EBADF)


def silence(fileno: int) -> None:
    """The reader of `fileno` went away: what is still written there goes nowhere
    (also Python's own flush at exit, which would otherwise print a traceback)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fileno)
        os.close(null)
