"""Cost and tokens from an agent's log, in each CLI's own format."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from forge.agents.output import Event, read_log
from forge.base.shape import as_object, number
from forge.frozen import frozen

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef


@frozen
class Usage:
    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None


_AIDER_TOKENS = re.compile(
    r"Tokens:\s*([\d.,]+\s*[kmb]?)\s*sent"
    r"(?:,\s*([\d.,]+\s*[kmb]?)\s*cache write)?(?:,\s*([\d.,]+\s*[kmb]?)\s*cache hit)?"
    r",\s*([\d.,]+\s*[kmb]?)\s*received\."
    r"(?:\s*Cost:\s*\$([\d.,]+)\s*message,\s*\$([\d.,]+)\s*session\.)?",
    re.IGNORECASE,
)


def _int(value: object) -> int | None:
    n = number(value)
    return None if n is None else int(n)


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def _count(text: str) -> int:
    """`2.5k` -> 2500, `1.2M` -> 1200000, `1,234` -> 1234."""
    t = text.strip().lower().replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000, "b": 1_000_000_000}.get(t[-1:], 1)
    return round(float(t.rstrip("kmb")) * scale)


def parse_usage(defn: AgentDef, output: str) -> Usage | None:
    """Cost and tokens the agent reported in its log; None when it reported none."""
    fmt = defn.usage_format
    if fmt == "aider":
        return _aider_usage(output)
    if fmt not in ("claude", "codex", "gemini"):
        return None
    dicts = read_log(output).events
    if fmt == "claude":
        return _claude_usage(dicts)
    if fmt == "codex":
        return _codex_usage(dicts)
    return _gemini_usage(dicts)


def _claude_usage(dicts: Sequence[Event]) -> Usage | None:
    results = [d for d in dicts if d.get("type") == "result"]
    if not results:
        return None
    last = results[-1]
    cost = number(last.get("total_cost_usd"))
    usage = as_object(last.get("usage")) or {}
    # Cache reads and writes are input too; summed so the count is what was sent.
    inputs: int | None = None
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        inputs = _add(inputs, _int(usage.get(key)))
    cost_usd = None if cost is None else float(cost)
    return Usage(cost_usd, inputs, _int(usage.get("output_tokens")))


def _codex_usage(dicts: Sequence[Event]) -> Usage | None:
    inputs = outputs = None
    seen = False
    for d in dicts:
        usage = as_object(d.get("usage"))
        if d.get("type") == "turn.completed" and usage is not None:
            seen = True
            inputs = _add(inputs, _int(usage.get("input_tokens")))
            outputs = _add(outputs, _int(usage.get("output_tokens")))
    # No USD in Codex's events: pricing would need a table that goes stale.
    return Usage(None, inputs, outputs) if seen else None


def _gemini_usage(dicts: Sequence[Event]) -> Usage | None:
    for d in reversed(dicts):
        stats = as_object(d.get("stats"))
        if stats is None:
            continue
        if "input_tokens" in stats or "output_tokens" in stats:  # stream-json `result`
            return Usage(None, _int(stats.get("input_tokens")), _int(stats.get("output_tokens")))
        models = as_object(stats.get("models"))
        if models is None:
            continue
        inputs = outputs = None
        for model in models.values():
            tokens = as_object((as_object(model) or {}).get("tokens"))
            if tokens is None:
                continue
            prompt = tokens.get("prompt", tokens.get("input"))
            inputs = _add(inputs, _int(prompt))
            # Thinking is billed as output.
            outputs = _add(
                outputs, _add(_int(tokens.get("candidates")), _int(tokens.get("thoughts")))
            )
        return Usage(None, inputs, outputs)
    return None


def _aider_usage(output: str) -> Usage | None:
    matches = list(_AIDER_TOKENS.finditer(output))
    if not matches:
        return None
    inputs = outputs = 0
    cost: float | None = None
    for m in matches:
        sent, _write, _hit, received, _msg_cost, session_cost = m.groups()
        inputs += _count(sent)
        outputs += _count(received)
        if session_cost:
            cost = float(session_cost.replace(",", ""))  # running total: the last one wins
    return Usage(cost, inputs, outputs)
