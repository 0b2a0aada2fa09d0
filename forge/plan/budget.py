"""A spending limit: `budget = "20 USD"` in a plan, or `forge run --budget 20`."""

from __future__ import annotations

import math
import re

_BUDGET = re.compile(r"^\s*\$?\s*(\d+(?:\.\d+)?)\s*(?:usd|\$)?\s*$", re.IGNORECASE)


def parse_budget(value: object) -> float:
    """`"20 USD"`, `"$20"`, `"20"`, `20`, `12.5` -> USD. ValueError says what is accepted."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        amount = float(value)
    elif isinstance(value, str) and (m := _BUDGET.match(value)):
        amount = float(m.group(1))
    else:
        raise ValueError(f'a budget is an amount in USD, like "20 USD" (got {value!r})')
    if not math.isfinite(amount):  # nan is never reached and never passed: no limit at all
        raise ValueError(f"a budget must be a finite amount in USD (got {value!r})")
    if amount <= 0:
        raise ValueError(f"a budget must be above 0 USD (got {value!r})")
    return amount


def describe(amount: float) -> str:
    return f"{amount:g} USD"
