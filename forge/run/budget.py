"""The plan's budget during a run: what has been spent, and whether it is spent out.

The spend is summed once when the run starts (attempts of earlier runs count: the
budget is the plan's) and then grows by each finished attempt, so a check costs
nothing however large the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from forge.plan.budget import describe
from forge.run.records.spend import attempt_spend, plan_spend
from forge.run.state.run_state import Attempt

if TYPE_CHECKING:
    from forge.run.context import RunContext


@dataclass
class Budget:
    limit: float | None  # USD; None: no budget
    spent: float = 0.0
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    plan: str = ""  # its name, for the command that raises the budget

    @classmethod
    def of(cls, ctx: RunContext, override: float | None) -> Budget:
        limit = override if override is not None else ctx.plan.budget
        if limit is None:
            return cls(None)
        prices = ctx.repo_config.all_prices()
        return cls(limit, plan_spend(ctx.state, prices).usd, prices, ctx.plan.name)

    def add(self, attempt: Attempt | None) -> None:
        if self.limit is not None and attempt is not None:
            self.spent += attempt_spend(attempt, self.prices).usd

    def spent_out(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def describe(self) -> str:
        assert self.limit is not None
        return (
            f"budget: the plan has spent ${self.spent:.2f} of its {describe(self.limit)} budget; "
            f"raise `budget` in the plan or give `forge run {self.plan} --budget "
            f"{math.ceil(max(self.limit, self.spent) * 200) / 100:g}`"
        )
