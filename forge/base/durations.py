"""Durations: one grammar for every place forge reads one.

A duration is one or more `NUMBER[UNIT]` parts ("90s", "1h30m", "1d 5h", "500ms",
"2 minutes"), or a plain number of seconds. Units: ms, s, m, h, d and their long
forms (milliseconds, secs, minutes, hrs, days, ...); case and spaces do not matter.
The same grammar reads a plan's `timeout`, an `[agents.X]` timeout, a verification
lane's `timeout` and `grace`, and the retry-after an agent's CLI prints.
"""

from __future__ import annotations

import math
import re

UNIT = r"(?:ms|milliseconds?|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)(?![a-z])"
NUMBER = r"\d+(?:\.\d+)?"
# A duration inside free text (an agent's "retry in 2 minutes"): one or more parts.
IN_TEXT = rf"(?:{NUMBER}\s*{UNIT}\s*)+|{NUMBER}"

_PART = re.compile(rf"({NUMBER})\s*({UNIT})?", re.IGNORECASE)
_WHOLE = re.compile(rf"\s*(?:{NUMBER}\s*(?:{UNIT})?\s*)+", re.IGNORECASE)
_EXAMPLES = "90s, 30m, 1h30m, 1d or 500ms"


def _unit_seconds(unit: str) -> float:
    u = unit.lower()
    if u.startswith(("ms", "milli")):
        return 0.001
    if u.startswith("s"):
        return 1.0
    if u.startswith("m"):
        return 60.0
    if u.startswith("h"):
        return 3600.0
    return 86400.0


def seconds_in(text: str) -> float | None:
    """The seconds the duration parts of `text` add up to; None when it has none."""
    parts = _PART.findall(text)
    if not parts:
        return None
    return sum(float(num) * _unit_seconds(unit or "s") for num, unit in parts)


def parse_duration(value: object) -> float:
    """Seconds from a duration (a string of the grammar above, or a number).

    Raises ValueError (with a message fit for a problem line) for anything else,
    including zero and negative values: a timeout of nothing is a typo, not a wish.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a duration such as {_EXAMPLES}, got {value!r}")
    if isinstance(value, str):
        seconds = seconds_in(value) if _WHOLE.fullmatch(value) else None
        if seconds is None:
            try:  # "-5", "1e3": numbers the grammar does not spell
                seconds = float(value)
            except ValueError:
                raise ValueError(
                    f"expected a duration such as {_EXAMPLES}, got {value!r}"
                ) from None
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be more than zero, got {value!r}")
    return seconds
