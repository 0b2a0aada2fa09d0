"""Which agent a task runs on now: each agent's backoff and pause after
infrastructure failures, the plan's fallback agents, per-agent caps.

An INFRA result (rate limit, quota, outage) is the provider's, not the task's:
the agent backs off, and nothing new starts on it until the backoff ends. While
it waits, tasks run on the plan's `fallback` agents, in order, skipping any
that waits or is paused too. An agent whose failures outlast the retries, or
that cannot run at all (missing binary, auth), is paused for the rest of the
run; the run pauses when a task has no agent left to run on.

Concurrency follows the provider: a rate limit halves the number of tasks an
agent may run at once (down to one), and each attempt that runs raises it by
one again, up to its `max_parallel` (additive increase, multiplicative
decrease, as TCP backs off a congested link).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from forge.frozen import frozen
from forge.plan.model import Task
from forge.run.state.run_state import TaskState

if TYPE_CHECKING:
    from forge.agents.spec import AgentSpec
    from forge.run.context import RunContext

CAP_EVENT = "concurrency: "  # how a cap's change is said (the live view keeps the last)


@frozen
class Choice:
    spec: AgentSpec
    why: str | None = None  # set when a fallback agent runs instead of the task's own


class Capacity:
    """Per-agent bookkeeping of one run. Only the dispatch loop's thread uses it."""

    def __init__(
        self,
        ctx: RunContext,
        *,
        retries: int,
        backoff: float,
        cap: float,
        clock: Callable[[], float] = time.monotonic,
        on_event: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.ctx = ctx
        self.on_event = on_event
        self.retries = retries
        self.backoff = backoff
        self.cap = cap
        self.clock = clock
        self.wait: dict[str, float] = {}  # agent -> end of its backoff
        self.why: dict[str, str] = {}  # agent -> its last infrastructure failure
        self.down: dict[str, str] = {}  # agent -> why it is paused for this run
        self.failures: dict[str, int] = {}  # INFRA results in a row, per agent
        self.last_hit: dict[str, float] = {}  # when its last INFRA result came in
        self.on: dict[str, str] = {}  # running task -> the agent it runs on
        self._caps: dict[str, int | None] = {}
        self.limit: dict[str, int] = {}  # agent -> its cap after rate limits (below max_parallel)
        ctx.capacity = self  # `auto` chooses among the agents that can run now

    # -- state of an agent ---------------------------------------------------------

    def usable(self, name: str) -> bool:
        return name not in self.down and self.clock() >= self.wait.get(name, 0.0)

    def describe(self, name: str) -> str:
        if name in self.down:
            return f"{name} paused ({self.down[name]})"
        return f"{name} waiting ({self.why.get(name, 'backoff')})"

    def max_parallel(self, name: str) -> int | None:
        if name not in self._caps:
            self._caps[name] = self.ctx.agents.resolve(name)[0].max_parallel
        return self._caps[name]

    def cap_of(self, name: str) -> int | None:
        """How many tasks may run on `name` now (None: no cap)."""
        return self.limit.get(name, self.max_parallel(name))

    def running_on(self, name: str) -> int:
        return sum(1 for n in self.on.values() if n == name)

    def under_cap(self, name: str) -> bool:
        cap = self.cap_of(name)
        return cap is None or self.running_on(name) < cap

    def _narrow(self, name: str) -> None:
        """A rate limit: half as many at once (the one that hit it included)."""
        cap = self.cap_of(name)
        now = cap if cap is not None else self.running_on(name) + 1
        narrowed = max(1, now // 2)
        if narrowed != self.limit.get(name):
            self.limit[name] = narrowed
            self.on_event(f"{CAP_EVENT}{name} at most {narrowed} at once (rate limited)")

    def _widen(self, name: str) -> None:
        if name not in self.limit:
            return
        top = self.max_parallel(name)
        wider = self.limit[name] + 1
        if top is not None and wider >= top:
            del self.limit[name]
            self.on_event(f"{CAP_EVENT}{name} back to {top} at once (max_parallel)")
        elif top is None and wider > self.running_on(name) + 1:
            del self.limit[name]  # past what it runs: no cap of its own again
            self.on_event(f"{CAP_EVENT}{name} no longer capped")
        else:
            self.limit[name] = wider
            self.on_event(f"{CAP_EVENT}{name} at most {wider} at once")

    # -- choosing ------------------------------------------------------------------

    def reviewer(self, task: Task) -> str | None:
        from forge.agents.spec import AgentSpec

        spec = self.ctx.plan.review_of(task)
        return None if spec is None else AgentSpec.parse(spec).name

    def choose(self, task: Task, ts: TaskState, primary: AgentSpec) -> Choice | None:
        """The spec to start `task` on now, or None: wait (backoff, cap)."""
        reviewer = self.reviewer(task)
        if reviewer is not None and not self.usable(reviewer):
            return None  # its work could not be judged
        if self.usable(primary.name):
            return Choice(primary) if self.under_cap(primary.name) else None
        from forge.run import next_agent

        for text in self.ctx.plan.fallback:
            nxt = next_agent.next_spec(self.ctx, task, ts, base_text=text)
            spec = nxt.spec
            if spec is None or spec.name == primary.name:
                continue  # escalation says stop on it, or it is the one that waits
            if self.usable(spec.name) and self.under_cap(spec.name):
                return Choice(spec, f"fallback: {self.describe(primary.name)}")
        return None

    def stuck(self, task: Task, primary: AgentSpec) -> str | None:
        """Why `task` cannot run again in this run (every candidate paused), or None."""
        from forge.agents.spec import AgentSpec

        reviewer = self.reviewer(task)
        if reviewer is not None and reviewer in self.down:
            return f"reviewer {self.describe(reviewer)}"
        names = [primary.name] + [AgentSpec.parse(t).name for t in self.ctx.plan.fallback]
        names = list(dict.fromkeys(names))
        if all(n in self.down for n in names):
            return "; ".join(self.describe(n) for n in names)
        return None

    # -- results -------------------------------------------------------------------

    def started(self, tid: str, name: str) -> None:
        self.on[tid] = name

    def finished(self, tid: str) -> str | None:
        return self.on.pop(tid, None)

    def worked(self, name: str) -> None:
        """An attempt on `name` ran (whatever its verdict): the provider is back."""
        self.failures.pop(name, None)
        self._widen(name)

    def failed(
        self, name: str, *, reason: str, kind: str | None, retry_after: float | None, since: float
    ) -> float | None:
        """Book an INFRA result of an attempt on `name` started at `since`. Returns
        the backoff in seconds, or None when the agent is now paused for the run."""
        from forge.agents.definition import PAUSE_AT_ONCE  # (agents' code: loaded on failure)

        now = self.clock()
        # Attempts already running when the last failure came in hit the same
        # outage: they are not more tries of their own.
        if since >= self.last_hit.get(name, float("-inf")) or name not in self.failures:
            self.failures[name] = self.failures.get(name, 0) + 1
            if kind == "rate-limit":  # (once per outage, as the failures count)
                self._narrow(name)
        self.last_hit[name] = now
        self.why[name] = reason
        n = self.failures[name]
        if kind in PAUSE_AT_ONCE or n > self.retries:
            # Waiting cannot bring back a missing binary or a bad login.
            self.down[name] = reason + (
                "" if kind in PAUSE_AT_ONCE else f" (after {n - 1} retries)"
            )
            return None
        wait = retry_after if retry_after is not None else self.backoff * 2 ** (n - 1)
        wait = min(wait, self.cap)
        self.wait[name] = max(self.wait.get(name, 0.0), now + wait)
        return wait
