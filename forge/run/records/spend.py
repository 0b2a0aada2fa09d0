"""What a plan's run has spent: USD where the agent's CLI reported it, else its
tokens priced from the table (forge/agents/prices.py), else tokens only.

The one place a cost is computed: `forge status` (and its --json), the run's
summary, the live view and the report all ask here. A price unknown is never
shown as `$0.00`: it reads as free."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from forge.agents.names import AgentSpec
from forge.agents.prices import Price, main_model, token_cost
from forge.base.text import usd
from forge.frozen import frozen
from forge.run.state.run_state import Attempt, Lost, RunState, Status


@frozen
class Spend:
    usd: float = 0.0  # reported plus priced
    input_tokens: int = 0
    output_tokens: int = 0
    unpriced: int = 0  # attempts with tokens but neither USD nor a price
    unpriced_input: int = 0  # their tokens
    unpriced_output: int = 0
    priced: int = 0  # attempts with a USD figure (reported or priced)

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.usd + other.usd,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.unpriced + other.unpriced,
            self.unpriced_input + other.unpriced_input,
            self.unpriced_output + other.unpriced_output,
            self.priced + other.priced,
        )

    @property
    def known_usd(self) -> float | None:
        """The USD spent, None when some of it is unknown."""
        return None if self.unpriced else self.usd

    def describe(self) -> str:
        """`$1.23, 2.1M in / 40.2k out tokens`, `unknown for 1 attempt (3.2k in /
        60 out tokens)`, or both."""
        unknown = f"unknown for {self.unpriced} attempt{'s' * (self.unpriced != 1)}"
        if self.unpriced_input or self.unpriced_output:
            unknown += f" ({_k(self.unpriced_input)} in / {_k(self.unpriced_output)} out tokens)"
        if self.unpriced and not self.priced:
            return unknown
        if not self.priced:  # shell tasks, or agents that report nothing: not $0.00
            return "n/a"
        text = usd(self.usd)
        priced_in = self.input_tokens - self.unpriced_input
        priced_out = self.output_tokens - self.unpriced_output
        if priced_in or priced_out:
            text += f", {_k(priced_in)} in / {_k(priced_out)} out tokens"
        return f"{text}; {unknown}" if self.unpriced else text

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "usd": round(self.usd, 6),
            "known_usd": None if self.known_usd is None else round(self.known_usd, 6),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "unpriced_attempts": self.unpriced,
            "unpriced_input_tokens": self.unpriced_input,
            "unpriced_output_tokens": self.unpriced_output,
            "priced_attempts": self.priced,
        }

    @classmethod
    def from_dict(cls, data: dict[str, float | int | None]) -> Spend:
        def num(key: str) -> int:
            return int(data.get(key) or 0)

        return cls(
            float(data.get("usd") or 0.0),
            num("input_tokens"),
            num("output_tokens"),
            num("unpriced_attempts"),
            num("unpriced_input_tokens"),
            num("unpriced_output_tokens"),
            num("priced_attempts"),
        )


def _k(n: int) -> str:
    return (
        f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)
    )


def attempt_usd(attempt: Attempt, prices: Mapping[str, Price]) -> float | None:
    if attempt.cost_usd is not None:
        return attempt.cost_usd
    return token_cost(priced_model(attempt), attempt.input_tokens, attempt.output_tokens, prices)


def priced_model(attempt: Attempt) -> str:
    """The model an attempt's tokens are priced as: the one its CLI reported
    serving (Gemini's `gemini-2.5-flash` for `flash`), else the one asked for."""
    ran = main_model(attempt.models or [])
    return ran or attempt.model or AgentSpec.of(attempt.agent).model or attempt.agent


def attempt_spend(attempt: Attempt, prices: Mapping[str, Price]) -> Spend:
    usd = attempt_usd(attempt, prices)
    tokens = attempt.input_tokens is not None or attempt.output_tokens is not None
    # A best-of-N loser stopped before its CLI said what it spent: not free.
    cut_off = attempt.lost == Lost.STOPPED
    unknown = usd is None and (tokens or cut_off)
    return Spend(
        usd or 0.0,
        attempt.input_tokens or 0,
        attempt.output_tokens or 0,
        1 if unknown else 0,
        (attempt.input_tokens or 0) if unknown else 0,
        (attempt.output_tokens or 0) if unknown else 0,
        1 if usd is not None else 0,
    )


def cost_usd(attempts: Iterable[Attempt], prices: Mapping[str, Price]) -> float | None:
    """The attempts' USD (reported or priced); None when none has a figure."""
    spend = spend_of(attempts, prices)
    return round(spend.usd, 6) if spend.priced else None


SHELL = "run"  # the agent of a shell task's attempts


def per_landed_usd(cost: float | None, landed_by_agents: int) -> float | None:
    """The cost per landed task, the one definition the run's summary, `forge status`
    (and its --json), the report and `forge stats` use: what the agents spent (every
    attempt, failed ones included) over the tasks agents landed. A shell task costs
    nothing and is not counted: a plan's shell steps do not make its agents cheaper.
    None: no figure (nothing priced, or no agent's task landed)."""
    if cost is None or not landed_by_agents:
        return None
    return round(cost / landed_by_agents, 6)


def landed_by_agents(state: RunState) -> int:
    """The plan's tasks that landed an agent's work (not a shell command's)."""
    return sum(
        1
        for ts in state.tasks.values()
        if ts.status == Status.MERGED and any(a.agent != SHELL for a in ts.every_attempt())
    )


def per_landed(spend: Spend, landed: int, by_agents: int) -> str:
    """`$0.41 per landed task` (`per_landed_usd`); `landed` counts shell tasks too."""
    if not landed:
        return "no task landed"
    if spend.unpriced and not spend.priced:
        return "unknown per landed task"
    figure = per_landed_usd(spend.usd if spend.priced else None, by_agents)
    if figure is None:
        return "n/a per landed task"
    more = " (some unknown)" if spend.unpriced else ""
    return f"{usd(figure)} per landed task{more}"


def spend_of(attempts: Iterable[Attempt], prices: Mapping[str, Price]) -> Spend:
    total = Spend()
    for attempt in attempts:
        total = total + attempt_spend(attempt, prices)
    return total


def plan_spend(state: RunState, prices: Mapping[str, Price]) -> Spend:
    return spend_of((a for ts in state.tasks.values() for a in ts.every_attempt()), prices)


def spend_data(state: RunState, prices: Mapping[str, Price]) -> dict[str, float | int | None]:
    """The plan's spend as data, with the tasks that landed (all, and by agents) and
    the cost per landed task (`per_landed_usd`)."""
    spend = plan_spend(state, prices)
    landed = sum(1 for ts in state.tasks.values() if ts.status == Status.MERGED)
    by_agents = landed_by_agents(state)
    known = spend.known_usd if spend.priced else None
    return {
        **spend.to_dict(),
        "landed": landed,
        "landed_by_agents": by_agents,
        "per_landed_usd": per_landed_usd(known, by_agents),
    }
