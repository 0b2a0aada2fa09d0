"""The one line that says why a step failed, taken from its log.

Usually the last line. But tools end with boilerplate that says nothing (pip's
`hint: See above for details.`, `note: This error originates from a subprocess`,
`[notice] A new release of pip is available`): then the last error line above it.
"""

from __future__ import annotations

import re

_NOISE = re.compile(
    r"^(hint|note|notice|help)\b|^\[notice\]|see above|^[│╰─>×\s]*$|^-+$|^=+$", re.IGNORECASE
)
_ERROR = re.compile(r"^(error|fatal)\b|^[A-Za-z_.]*(Error|Exception)\b\s*:", re.IGNORECASE)
WIDTH = 200


def reason_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("forge: ")]
    if not lines:
        return "(no output)"
    if not _NOISE.search(lines[-1]):
        return lines[-1][:WIDTH]
    for line in reversed(lines):
        if _ERROR.search(line):
            return line[:WIDTH]
    for line in reversed(lines):
        if not _NOISE.search(line):
            return line[:WIDTH]
    return lines[-1][:WIDTH]
