"""What tokens cost, for CLIs that report tokens but no USD (Codex, Gemini).

A small built-in table, USD per million input / output tokens at list price when
it was written; prices change, so `[prices]` in forge.toml overrides or extends it:

    [prices]
    "gpt-5" = { input = 1.25, output = 10 }
    "my-model" = [0.5, 2.0]

An attempt is priced as the model its CLI reported serving it (Gemini's
`gemini-2.5-flash` when `flash` was asked), else the one asked for. A model
is priced by the longest table key its name contains (`gpt-5-codex`
is `gpt-5-codex` if listed, else `gpt-5`). An unknown model is not priced: its
tokens are shown, and no guess enters the cost.
"""

from __future__ import annotations

from collections.abc import Mapping

Price = tuple[float, float]  # USD per million input tokens, per million output tokens

DEFAULT_PRICES: Mapping[str, Price] = {
    "opus": (15.0, 75.0),
    "opus-4-5": (5.0, 25.0),
    "sonnet": (3.0, 15.0),
    "haiku": (1.0, 5.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-4.1": (2.0, 8.0),
    "o3": (2.0, 8.0),
    "o4-mini": (1.1, 4.4),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
    "gemini-2.5-flash-lite": (0.1, 0.4),
}


# Models a CLI calls on the side (titles, summaries, routing), never the one asked for.
_HELPERS = ("haiku", "flash-lite")


def is_helper(model: str) -> bool:
    return any(h in model.lower() for h in _HELPERS)


def main_model(ran: list[str]) -> str | None:
    """The model that did the work among those a CLI reported (not a helper)."""
    main = [m for m in ran if not is_helper(m)] or ran
    return main[0] if main else None


def price_of(model: str | None, prices: Mapping[str, Price]) -> Price | None:
    if not model:
        return None
    name = model.lower()
    hits = [key for key in prices if key.lower() in name]
    return prices[max(hits, key=len)] if hits else None


def token_cost(
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    prices: Mapping[str, Price],
) -> float | None:
    """USD for the tokens at the model's price; None when the model has none."""
    if input_tokens is None and output_tokens is None:
        return None
    price = price_of(model, prices)
    if price is None:
        return None
    return ((input_tokens or 0) * price[0] + (output_tokens or 0) * price[1]) / 1_000_000
