"""Which agent a task runs on now: each agent's backoff and pause after
infrastructure failures, the plan's fallback agents, per-agent caps.

An INFRA result (rate limit, quota, outage) is the provider's, not the task's:
the agent backs off, and nothing new starts on it until the backoff ends. While
it waits, tasks run on the plan's `fallback` agents, in order, skipping any
that waits or is paused too. An agent whose failures outlast the retries, or
that cannot run at all (missing binary, auth), is paused for the rest of the
run; the run pauses when a task has no agent left to run on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from forge.agents.output import PAUSE_AT_ONCE
from forge.plan.model import Task
from forge.run.attempt.context import Agents
from forge.run.state.run_state import TaskState

if TYPE_CHECKING:
    from forge.agents.spec import AgentSpec


@dataclass(frozen=True)
class Choice:
    spec: AgentSpec
    why: str | None = None  # set when a fallback agent runs instead of the task's own


class Capacity:
    """Per-agent bookkeeping of one run. Only the dispatch loop's thread uses it."""

    def __init__(
        self,
        ctx: Agents,
        *,
        retries: int,
        backoff: float,
        cap: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ctx = ctx
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

    # -- state of an agent ---------------------------------------------------------

    def usable(self, name: str) -> bool:
        return name not in self.down and self.clock() >= self.wait.get(name, 0.0)

    def describe(self, name: str) -> str:
        if name in self.down:
            return f"{name} paused ({self.down[name]})"
        return f"{name} waiting ({self.why.get(name, 'backoff')})"

    def max_parallel(self, name: str) -> int | None:
        if name not in self._caps:
            from forge.agents import spec as agents

            self._caps[name] = agents.resolve(name, self.ctx.agent_defs)[0].max_parallel
        return self._caps[name]

    def under_cap(self, name: str) -> bool:
        cap = self.max_parallel(name)
        return cap is None or sum(1 for n in self.on.values() if n == name) < cap

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

    def failed(
        self, name: str, *, reason: str, kind: str | None, retry_after: float | None, since: float
    ) -> float | None:
        """Book an INFRA result of an attempt on `name` started at `since`. Returns
        the backoff in seconds, or None when the agent is now paused for the run."""
        now = self.clock()
        # Attempts already running when the last failure came in hit the same
        # outage: they are not more tries of their own.
        if since >= self.last_hit.get(name, float("-inf")) or name not in self.failures:
            self.failures[name] = self.failures.get(name, 0) + 1
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
