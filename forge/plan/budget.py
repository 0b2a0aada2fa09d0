"""Money: a spending limit (`budget = "20 USD"` in a plan, or `forge run --budget 20`)
and model prices (`[prices]` in forge.toml)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from forge.base.tomlread import Problems

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


def parse_prices(
    value: object, *, problems: Problems, line_of: Callable[[str], int | None]
) -> dict[str, tuple[float, float]]:
    """`[prices]`: model = { input = USD, output = USD } per million tokens, or
    model = [input, output]."""
    if not isinstance(value, dict):
        problems.add("`prices` must be a table ([prices])", line=line_of("prices"))
        return {}
    out: dict[str, tuple[float, float]] = {}
    for model, price in value.items():
        pair = (
            [price.get("input"), price.get("output")]
            if isinstance(price, dict) and set(price) <= {"input", "output"}
            else price
        )
        if (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) and x >= 0 for x in pair)
        ):
            out[str(model)] = (float(pair[0]), float(pair[1]))
        else:
            problems.add(
                f"[prices] {model}: give USD per million tokens as "
                f"{{ input = 3.0, output = 15.0 }} or [3.0, 15.0]",
                line=line_of(str(model)),
            )
    return out
