"""routing: the cost per landed task `agent = "auto"` reaches, against always the
cheapest spec and always the strongest, on simulated specs whose land rates
(by task size) and prices are known.

Each task is given a size; a spec lands it with its rate for that size, and a
task that fails is retried on the same spec (as forge retries on the agent it
chose), moving to the strongest after three failures (escalation). `auto`
chooses with forge's own policy (forge/run/records/routing.py) from the history the
simulation has built so far. Figures after 50, 200 and 1000 tasks; the ratio
is auto's cost per landed task over the better of the two fixed policies
(below 1: auto beats both).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kit import Context, Figure

from forge.agents.prices import DEFAULT_PRICES
from forge.run.records.history import Row
from forge.run.records.routing import arms_for, pick

# spec -> (USD per attempt, land rate for a small, medium, large task). An
# attempt costs what 10k tokens in and out cost at the model's list price.
SPECS: dict[str, tuple[float, tuple[float, float, float]]] = {
    "cheap:gemini-2.5-flash": (0.028, (0.75, 0.35, 0.08)),
    "mid:gpt-5": (0.1125, (0.92, 0.8, 0.5)),
    "strong:opus-4-5": (0.30, (0.97, 0.93, 0.85)),
}
CHEAPEST, STRONGEST = "cheap:gemini-2.5-flash", "strong:opus-4-5"
SHAPES = ((1, 400), (4, 4_000), (12, 12_000))  # (files, prompt chars) per size


def _attempts(
    spec: str, size: int, rng: random.Random, rows: list[Row], task: str
) -> tuple[float, bool]:
    """Run one task from `spec`: its cost and whether it landed."""
    spent, failures = 0.0, 0
    files, chars = SHAPES[size]
    while failures < 8:
        use = spec if failures < 3 else STRONGEST
        cost, rates = SPECS[use]
        landed = rng.random() < rates[size]
        spent += cost
        rows.append(
            Row("sim", task, use, "MERGED" if landed else "FAILED", landed, False, cost,
                None, None, 0.0, 0.0, None, files, chars, None)
        )  # fmt: skip
        if landed:
            return spent, True
        failures += 1
    return spent, False


def simulate(n: int, choose: Callable[[int, list[Row]], str], seed: int) -> float:
    rng = random.Random(seed)
    rows: list[Row] = []
    spent, landed = 0.0, 0
    for i in range(n):
        size = rng.choice((0, 0, 1, 2))
        cost, ok = _attempts(choose(size, rows), size, rng, rows, f"t{i}")
        spent += cost
        landed += ok
    return spent / max(landed, 1)


def _auto(seed: int) -> Callable[[int, list[Row]], str]:
    rng = random.Random(seed)

    def choose(size: int, rows: list[Row]) -> str:
        return pick(arms_for(list(SPECS), rows, size), DEFAULT_PRICES, rng)[0]

    return choose


def run(ctx: Context) -> list[Figure]:
    figures = []
    sizes = (50, 200) if ctx.quick else (50, 200, 1000)
    seeds = range(3)
    for n in sizes:
        auto = sum(simulate(n, _auto(s), s) for s in seeds) / len(seeds)
        cheap = sum(simulate(n, lambda _z, _r: CHEAPEST, s) for s in seeds) / len(seeds)
        strong = sum(simulate(n, lambda _z, _r: STRONGEST, s) for s in seeds) / len(seeds)
        figures.append(
            Figure(
                bench="routing",
                config=f"{n} tasks, 3 seeds",
                forge=f"auto ${auto:.3f}/landed",
                alternative=f"cheapest ${cheap:.3f}, strongest ${strong:.3f}",
                ratio=auto / min(cheap, strong),
                target=None,
                note="simulated specs; below 1: auto beats both fixed policies",
            )
        )
    return figures
