"""What a plan's run has spent: USD where the agent's CLI reported it, else its
tokens priced from the table (forge/agents/prices.py), else tokens only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from forge.agents.prices import Price, token_cost
from forge.run.state.run_state import Attempt, RunState


@dataclass(frozen=True)
class Spend:
    usd: float = 0.0  # reported plus priced
    input_tokens: int = 0
    output_tokens: int = 0
    unpriced: int = 0  # attempts with tokens but neither USD nor a price

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.usd + other.usd,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.unpriced + other.unpriced,
        )

    def describe(self) -> str:
        parts = [f"${self.usd:.2f}"]
        if self.input_tokens or self.output_tokens:
            parts.append(f"{_k(self.input_tokens)} in / {_k(self.output_tokens)} out tokens")
        if self.unpriced:
            parts.append(f"{self.unpriced} attempt{'s' * (self.unpriced != 1)} not priced")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "usd": round(self.usd, 6),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "unpriced_attempts": self.unpriced,
        }


def _k(n: int) -> str:
    return (
        f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)
    )


def attempt_usd(attempt: Attempt, prices: Mapping[str, Price]) -> float | None:
    if attempt.cost_usd is not None:
        return attempt.cost_usd
    model = attempt.model or attempt.agent.partition(":")[2].partition(":")[0] or attempt.agent
    return token_cost(model, attempt.input_tokens, attempt.output_tokens, prices)


def attempt_spend(attempt: Attempt, prices: Mapping[str, Price]) -> Spend:
    usd = attempt_usd(attempt, prices)
    tokens = attempt.input_tokens is not None or attempt.output_tokens is not None
    return Spend(
        usd or 0.0,
        attempt.input_tokens or 0,
        attempt.output_tokens or 0,
        1 if usd is None and tokens else 0,
    )


def spend_of(attempts: Iterable[Attempt], prices: Mapping[str, Price]) -> Spend:
    total = Spend()
    for attempt in attempts:
        total = total + attempt_spend(attempt, prices)
    return total


def plan_spend(state: RunState, prices: Mapping[str, Price]) -> Spend:
    return spend_of((a for ts in state.tasks.values() for a in ts.attempts), prices)
