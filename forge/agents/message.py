"""A CLI's error as a person reads it: the innermost human message.

CLIs wrap a provider's answer in their own words: Codex quotes the HTTP body
(`unexpected status 400: {"error": {"message": "...", "type": ...}}`), Gemini
nests one JSON error in another and points at a report file ("Full report
available at /tmp/..."), and a Node CLI prints its stack after the message. A
reason quotes only the message: the JSON unwrapped, stack frames and report
paths dropped.
"""

from __future__ import annotations

import json
import re

_REPORT = re.compile(r"\s*\(?full report (?:is )?available at:?\s*\S+\)?", re.IGNORECASE)
# A stack frame (Node's `at fn (file:1:2)`, Python's `File "x", line 3`) or what
# closes a printed object: never the message.
_FRAME = re.compile(
    r"^(?:at\s+\S|file \"|traceback \(most recent call last\)|[{}\[\]](?:,)?$|\w+:\s*\d+,?$)",
    re.IGNORECASE,
)
_DEPTH = 6


def is_noise(line: str) -> bool:
    """A line that is a stack frame, a brace, or only a report's path."""
    text = line.strip()
    return not text or bool(_FRAME.search(text)) or not _REPORT.sub("", text).strip()


def _innermost(value: object, depth: int = 0) -> str | None:
    """The deepest `message` (or a string `error`) in a decoded JSON value."""
    if depth > _DEPTH:
        return None
    if isinstance(value, list):
        for item in value:
            found = _innermost(item, depth + 1)
            if found:
                return found
        return None
    if not isinstance(value, dict):
        return None
    err = value.get("error")
    if isinstance(err, dict | list):
        found = _innermost(err, depth + 1)
        if found:
            return found
    for key in ("message", "error", "detail", "error_description"):
        text = value.get(key)
        if isinstance(text, str) and text.strip():
            return human(text, depth + 1)
    return None


def human(text: str, depth: int = 0) -> str:
    """`text` with embedded JSON replaced by its innermost message, report paths
    and stack frames dropped, on one line."""
    text = _REPORT.sub("", text)
    lines = [ln for ln in text.splitlines() if not is_noise(ln)] or text.splitlines()[:1]
    text = " ".join(" ".join(lines).split())
    start = text.find("{")
    if start < 0 or depth > _DEPTH:
        return text
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return text
    inner = _innermost(value, depth)
    if not inner:
        return text
    head = text[:start].rstrip(" [(:").rstrip()
    tail = text[end:].strip(" ])")
    out = f"{head}: {inner}" if head else inner
    return f"{out} {tail}".strip() if tail else out
