"""The model that really ran: what a CLI reports it used, against what was asked.

A CLI can answer with another model than the one asked for (an alias that moved,
a silent fallback). Claude Code names the model asked for in its `system/init`
event and its result's `modelUsage`, but the model that served each reply in
that reply's `assistant` event: the replies are read first. Gemini keys its
stats by model and names it in stream-json's `init`. Codex 0.171's events name
no model and aider prints only the one it was told: for them no check is made,
and `forge stats` says "not checked" rather than report no mismatch. An alias
matches any model of its family: `opus` matches `claude-opus-4-5-20251101`,
`flash` matches `gemini-2.5-flash`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from forge.agents.output import Event, read_log
from forge.agents.prices import is_helper
from forge.base.shape import as_object

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)*")


def reported_models(defn: AgentDef, output: str) -> list[str]:
    """The models the agent's CLI says it used, in the order it named them."""
    fmt = defn.usage_format
    if fmt not in ("claude", "codex", "gemini"):
        return []
    dicts = read_log(output).events
    found: list[str] = []
    if fmt == "claude":
        # The replies name the model that served them; init and the summary name
        # the one asked for, even when the provider swapped it.
        found = [m for obj in dicts for m in _claude_reply_model(obj)]
    if not found:
        for obj in dicts:
            found += _models_in(obj, fmt)
    return list(dict.fromkeys(m for m in found if m))


def _claude_reply_model(obj: Event) -> list[str]:
    """The model of a top-level assistant reply (a subagent's replies, under a
    tool use, may run on another model by design; `<synthetic>` is the CLI's own
    error text, no model's)."""
    if obj.get("type") != "assistant" or obj.get("parent_tool_use_id"):
        return []
    model = (as_object(obj.get("message")) or {}).get("model")
    return [model] if isinstance(model, str) and not model.startswith("<") else []


def _models_in(obj: Event, fmt: str) -> list[str]:
    model = obj.get("model")
    named = [model] if isinstance(model, str) else []
    if fmt == "claude":
        usage = as_object(obj.get("modelUsage"))
        if obj.get("type") == "result" and usage is not None:
            return [str(k) for k in usage]
        if obj.get("type") == "system" and obj.get("subtype") == "init":
            return named
        return []
    if fmt == "gemini":
        models = (as_object(obj.get("stats")) or {}).get("models")
        if isinstance(models, dict):
            return [str(k) for k in models]
        return named if obj.get("type") == "init" else []
    # Codex: a `model` field wherever an event has one (none in 0.171's).
    for value in obj.values():
        inner = (as_object(value) or {}).get("model")
        if isinstance(inner, str):
            named.append(inner)
    return named


def matches(asked: str, ran: str) -> bool:
    """Whether `ran` is the model `asked` names (an alias names its family)."""
    a, r = asked.lower(), ran.lower()
    if a in ("auto", "default") or a in r or r in a:
        return True
    words = set(_WORD.findall(r))
    return all(w in words for w in _WORD.findall(a))


def mismatch(asked: str | None, ran: list[str]) -> str | None:
    """`asked opus, ran claude-sonnet-4-5` when no model the CLI reported is the one
    asked for; None when it is, or when nothing was asked or reported."""
    if not asked or not ran or any(matches(asked, m) for m in ran):
        return None
    main = [m for m in ran if not is_helper(m)] or ran
    return f"asked {asked}, ran {', '.join(main)}"
