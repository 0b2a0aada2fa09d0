"""Text for people. Text from tasks is data: what forge prints never carries a task's
terminal control; and aligned tables fit for a terminal, a log or a pipe.

A task's output, reason or file name may hold `\\033]0;TITLE\\007` (a command to the
terminal) or `[bold]` (markup to rich). Everything forge prints goes through
`printable`; rich is given `Text` objects, never markup strings. Logs on disk stay
as the task wrote them.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Sequence
from typing import TextIO

# C0 controls but newline and tab, DEL, and the C1 controls (U+0080-U+009F: a
# terminal may take U+009B as CSI, the start of an escape sequence).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# In a one-line place (a path in a message, a table cell) newline and tab too.
_CONTROL_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


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
    return _CONTROL.sub(_caret, text)


def _in_line(m: re.Match[str]) -> str:
    return _NAMED.get(m.group()) or _caret(m)


def one_line(text: str) -> str:
    """`text` on one line, every control character visible (newline -> `\\n`): for a
    file name in a message or a cell of a table."""
    return _CONTROL_IN_LINE.sub(_in_line, text)


class PrintableStream(io.TextIOBase):
    """A text stream that writes `printable(text)` to the stream it wraps. `raw` is
    the wrapped stream, for a writer whose own control sequences are wanted (rich's
    live display, which is given only escaped text)."""

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw
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
        from forge.base.outfiles import is_broken_pipe, silence

        if not is_broken_pipe(exc):
            raise exc
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            silence(self.raw.fileno())

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


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]
