"""`agent = "auto"`: each task's spec chosen from a pool to minimise the expected
cost per landed task, learnt from the attempts history.

Thompson sampling: for each spec that can run now, a land rate is drawn from
Beta(1 + landed, 1 + not landed) over its recorded attempts on tasks of the
same size (its attempts on other sizes count as two, at their rate: a prior,
not evidence), and the expected cost per
landed task is its mean cost per attempt over that draw; the smallest wins.
The draw explores by itself: a spec with few attempts has a wide posterior.
The probability of the choice (estimated over many draws, then the choice
drawn from those probabilities, so the recorded figure is exact) and the
specs it was chosen from are recorded on the attempt (`propensity`,
`chosen_from`). Without any history of the pool, the cheapest spec by the
price table goes first (no randomness: propensity 1). A task's retries stay
on the agent chosen first, so escalation moves up its ladder as usual. An
agent of the pool that has only ever failed with INFRA (a provider error, a
bad login, a missing binary) is left out for a day while another can run.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from forge.agents.names import AgentSpec
from forge.agents.prices import Price, price_of
from forge.frozen import frozen
from forge.run.state.run_state import UNCOUNTED, Attempt, Status, TaskState

if TYPE_CHECKING:
    from forge.plan.model import Task
    from forge.run.context import RunContext
    from forge.run.records.history import Row

DRAWS = 400  # Monte Carlo draws that estimate each spec's probability of being chosen
RECHECK_AFTER = 24 * 3600.0  # an agent that never ran is left out of choices this long
OTHER_SIZE = 2.0  # attempts on tasks of other sizes count as this many, at their rate
_SETTLED = frozenset({Status.MERGED, Status.FAILED, Status.TIMEOUT, Status.CONFLICT})


@frozen
class Arm:
    """What the history says of one spec, for tasks like the one to place."""

    spec: str
    tried: float = 0.0  # settled attempts, weighted by size similarity
    landed: float = 0.0
    cost: float | None = None  # mean USD per attempt; None: no known cost


@frozen
class Pick:
    spec: str
    propensity: float
    chosen_from: tuple[str, ...]


def size_of(files: int, prompt_chars: int) -> int:
    """0 small, 1 medium, 2 large: what "tasks of similar size" means."""
    if files <= 2 and prompt_chars < 2_000:
        return 0
    if files <= 6 and prompt_chars < 8_000:
        return 1
    return 2


def list_price(spec: str, prices: Mapping[str, Price]) -> float | None:
    """USD per million tokens in plus out at list price, from the spec's model (or
    its name); an alias (`flash`) takes the cheapest table entry of its family."""
    parts = AgentSpec.of(spec)
    for name in ([parts.model] if parts.model else []) + [parts.name]:
        price = price_of(name, prices)
        if price is None:
            family = [p for key, p in prices.items() if name.lower() in key.lower()]
            price = min(family, key=sum) if family else None
        if price is not None:
            return price[0] + price[1]
    return None


def cheapest(specs: Sequence[str], prices: Mapping[str, Price]) -> str:
    known = [(p, i) for i, s in enumerate(specs) if (p := list_price(s, prices)) is not None]
    return specs[min(known)[1]] if known else specs[0]


def _costs(arms: Sequence[Arm], prices: Mapping[str, Price]) -> list[float]:
    """Each arm's cost per attempt; an arm without a known cost gets its list price
    scaled as the others' costs relate to theirs (or the list price alone)."""
    ratios = [
        a.cost / lp
        for a in arms
        if a.cost is not None and (lp := list_price(a.spec, prices)) and lp > 0
    ]
    scale = sum(ratios) / len(ratios) if ratios else 1.0
    known = [a.cost for a in arms if a.cost is not None]
    out = []
    for a in arms:
        lp = list_price(a.spec, prices)
        if a.cost is not None:
            out.append(a.cost)
        elif lp is not None:
            out.append(lp * scale)
        else:  # unknown: as dear as the dearest known, so it is not a free lunch
            out.append(max(known, default=1.0))
    return out


def probabilities(
    arms: Sequence[Arm], prices: Mapping[str, Price], rng: random.Random, draws: int = DRAWS
) -> list[float]:
    """How often each arm wins a Thompson draw of the cost per landed task."""
    costs = _costs(arms, prices)
    wins = [0] * len(arms)
    for _ in range(draws):
        best, best_i = float("inf"), 0
        for i, (arm, cost) in enumerate(zip(arms, costs, strict=True)):
            rate = rng.betavariate(1.0 + arm.landed, 1.0 + max(0.0, arm.tried - arm.landed))
            value = cost / max(rate, 1e-9)
            if value < best:
                best, best_i = value, i
        wins[best_i] += 1
    return [w / draws for w in wins]


def pick(arms: Sequence[Arm], prices: Mapping[str, Price], rng: random.Random) -> tuple[str, float]:
    """The chosen spec and the probability it had."""
    if len(arms) == 1:
        return arms[0].spec, 1.0
    if not any(a.tried for a in arms):
        return cheapest([a.spec for a in arms], prices), 1.0
    probs = probabilities(arms, prices, rng)
    chosen = rng.choices(range(len(arms)), weights=probs)[0]
    return arms[chosen].spec, probs[chosen]


def only_failed(rows: Sequence[Row], now: float) -> set[str]:
    """Agents whose every recorded attempt failed on the provider or the CLI itself
    (INFRA: a bad login, a missing binary, an outage), the last one within
    RECHECK_AFTER: a choice would only fail again, once per new run. After that
    they are tried again (a login may have been fixed)."""
    infra: dict[str, float] = {}
    ran: set[str] = set()
    for r in rows:
        name = AgentSpec.of(r.agent).name
        if r.infra:
            infra[name] = max(infra.get(name, 0.0), r.started + r.seconds)
        elif r.outcome != Status.INTERRUPTED:
            ran.add(name)
    return {n for n, last in infra.items() if n not in ran and now - last < RECHECK_AFTER}


def arms_for(specs: Sequence[str], rows: Sequence[Row], size: int) -> list[Arm]:
    """Each spec's weighted record for a task of `size`."""
    same = {s: [0, 0] for s in specs}  # tried, landed
    other = {s: [0, 0] for s in specs}
    spent: dict[str, list[float]] = {s: [] for s in specs}
    for r in rows:
        if r.agent not in same or r.outcome not in _SETTLED:
            continue
        counts = same if size_of(r.files, r.prompt_chars) == size else other
        counts[r.agent][0] += 1
        counts[r.agent][1] += r.landed
        if r.cost_usd is not None:
            spent[r.agent].append(r.cost_usd)
    arms = []
    for s in specs:
        tried, landed = float(same[s][0]), float(same[s][1])
        if other[s][0]:
            weight = min(OTHER_SIZE, float(other[s][0]))
            tried += weight
            landed += weight * other[s][1] / other[s][0]
        cost = sum(spent[s]) / len(spent[s]) if spent[s] else None
        arms.append(Arm(s, tried, landed, cost))
    return arms


@dataclass
class Router:
    """One run's routing: the pool, the history it learns from, pending choices."""

    ctx: RunContext
    pool: dict[str, str]  # resolved spec (as attempts record it) -> the pool's text
    prices: Mapping[str, Price]
    rng: random.Random = field(default_factory=lambda: random.Random(os.urandom(8)))
    pending: dict[str, Pick] = field(default_factory=dict)  # task -> its drawn spec

    def _usable(self, spec: str) -> bool:
        capacity = self.ctx.capacity  # the dispatcher's: which agents can run now
        return capacity is None or bool(capacity.usable(AgentSpec.of(spec).name))

    def spec_for(self, task: Task, ts: TaskState) -> str:
        """The pool text the task runs on: the one chosen for its first attempt,
        or a new choice among the specs that can run now."""
        spent = [a for a in ts.attempts if a.status not in UNCOUNTED and a.agent != "run"]
        if spent:  # retries stay on the chosen agent; escalation moves it up
            name = AgentSpec.of(spent[-1].agent).name
            return next((t for s, t in self.pool.items() if AgentSpec.of(s).name == name), name)
        got = self.pending.get(task.id)
        if got is not None and self._usable(got.spec):
            return self.pool[got.spec]
        live = [s for s in self.pool if self._usable(s)]
        if not live:  # every one waits or is paused: capacity says which
            down = {} if self.ctx.capacity is None else self.ctx.capacity.down
            first = next(iter(self.pool))
            return self.pool[
                next((s for s in self.pool if AgentSpec.of(s).name not in down), first)
            ]
        from forge.run.records import history

        rows = history.rows(self.ctx.repo.state)
        dead = only_failed(rows, time.time())
        live = [s for s in live if AgentSpec.of(s).name not in dead] or live
        size = size_of(len(task.files), len(task.prompt or ""))
        spec, p = pick(arms_for(live, rows, size), self.prices, self.rng)
        self.pending[task.id] = Pick(spec, round(p, 4), tuple(self.pool[s] for s in live))
        return self.pool[spec]


def router_of(ctx: RunContext) -> Router:
    if not isinstance(ctx.router, Router):
        config = ctx.repo_config
        texts = ctx.plan.auto or config.auto
        pool = {str(ctx.agents.resolve(t)[1]): t for t in texts}
        ctx.router = Router(ctx, pool, config.all_prices())
    return ctx.router


def stamp(ctx: RunContext, task: str, attempt: Attempt) -> Attempt:
    """The new attempt, with the choice that put it on its spec, if one did."""
    router = ctx.router
    got = router.pending.pop(task, None) if isinstance(router, Router) else None
    if got is not None and attempt.agent == got.spec:
        return replace(attempt, propensity=got.propensity, chosen_from=list(got.chosen_from))
    return attempt
