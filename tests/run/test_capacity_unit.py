"""Capacity's bookkeeping with a clock of its own: backoff, pauses, counting."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from forge.agents.book import AgentBook
from forge.agents.spec import AgentSpec
from forge.plan.model import Plan, Task
from forge.run.capacity import Capacity
from forge.run.state.run_state import TaskState

if TYPE_CHECKING:
    from forge.run.context import RunContext


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


DEFS = {"a": {"command": ["a"]}, "b": {"command": ["b"]}}


def capacity(
    plan: Plan, clock: Clock, retries: int = 2, defs: dict[str, dict[str, Any]] = DEFS
) -> Capacity:
    # A stand-in for the run context: the bookkeeping reads its plan and agents only.
    ctx = cast("RunContext", SimpleNamespace(plan=plan, agents=AgentBook.of(defs), capacity=None))
    return Capacity(ctx, retries=retries, backoff=10.0, cap=300.0, clock=clock)


TASK = Task(id="t", prompt="p", files=("x",))


def test_backoff_doubles_and_then_pauses_the_agent() -> None:
    clock = Clock()
    cap = capacity(Plan(name="p", tasks=(TASK,)), clock)
    assert (
        cap.failed("a", reason="rate-limit: slow", kind="rate-limit", retry_after=None, since=99)
        == 10
    )
    assert not cap.usable("a")
    clock.now += 10
    assert cap.usable("a")
    assert (
        cap.failed("a", reason="rate-limit: slow", kind="rate-limit", retry_after=None, since=110)
        == 20
    )
    clock.now += 20
    assert (
        cap.failed("a", reason="rate-limit: slow", kind="rate-limit", retry_after=None, since=130)
        is None
    )
    assert cap.down["a"] == "rate-limit: slow (after 2 retries)"
    assert cap.stuck(TASK, AgentSpec("a")) is not None


def test_attempts_caught_in_one_outage_count_once() -> None:
    clock = Clock()
    cap = capacity(Plan(name="p", tasks=(TASK,)), clock, retries=1)
    for _ in range(4):  # four tasks were running when the limit hit
        cap.failed("a", reason="r", kind="rate-limit", retry_after=5, since=90)
    assert "a" not in cap.down and cap.failures["a"] == 1
    cap.worked("a")
    assert "a" not in cap.failures


def test_auth_pauses_at_once_and_a_hint_is_honoured() -> None:
    clock = Clock()
    cap = capacity(Plan(name="p", tasks=(TASK,)), clock)
    assert cap.failed("a", reason="auth: no", kind="auth", retry_after=None, since=0) is None
    assert cap.down["a"] == "auth: no"
    assert cap.failed("b", reason="quota", kind="quota", retry_after=9999, since=0) == 300


def test_a_fallback_is_chosen_only_while_the_agent_waits() -> None:
    clock = Clock()
    plan = Plan(name="p", fallback=("b",), tasks=(TASK,))
    cap = capacity(plan, clock)
    ts = TaskState(id="t")
    assert cap.choose(TASK, ts, AgentSpec("a")) == cap.choose(TASK, ts, AgentSpec("a"))
    assert cap.choose(TASK, ts, AgentSpec("a")).spec == AgentSpec("a")  # type: ignore[union-attr]
    cap.failed("a", reason="rate-limit: x", kind="rate-limit", retry_after=None, since=0)
    choice = cap.choose(TASK, ts, AgentSpec("a"))
    assert choice is not None and choice.spec.name == "b"
    assert choice.why == "fallback: a waiting (rate-limit: x)"
    cap.failed("b", reason="network: y", kind="network", retry_after=None, since=0)
    assert cap.choose(TASK, ts, AgentSpec("a")) is None  # both wait: nothing starts
    assert cap.stuck(TASK, AgentSpec("a")) is None  # but waiting is not paused
    clock.now += 10
    assert cap.choose(TASK, ts, AgentSpec("a")).spec.name == "a"  # type: ignore[union-attr]


def test_a_cap_holds_tasks_back() -> None:
    clock = Clock()
    defs = {"a": {"command": ["a"], "max_parallel": 1}}
    cap = capacity(Plan(name="p", tasks=(TASK,)), clock, defs=defs)
    ts = TaskState(id="t")
    assert cap.choose(TASK, ts, AgentSpec("a")) is not None
    cap.started("other", "a")
    assert cap.choose(TASK, ts, AgentSpec("a")) is None
    cap.finished("other")
    assert cap.choose(TASK, ts, AgentSpec("a")) is not None


def test_a_rate_limit_halves_the_cap_and_successes_raise_it_again() -> None:
    clock = Clock()
    said: list[str] = []
    ctx = SimpleNamespace(
        plan=Plan(name="p", tasks=(TASK,)),
        agents=AgentBook.of({"a": {"command": ["a"], "max_parallel": 8}}),
    )
    run = cast("RunContext", ctx)
    cap = Capacity(run, retries=5, backoff=1.0, cap=300.0, clock=clock, on_event=said.append)
    for i in range(8):
        cap.started(f"t{i}", "a")
    cap.finished("t0")
    for _ in range(3):  # three attempts caught in one outage: one halving
        cap.failed("a", reason="rate-limit: x", kind="rate-limit", retry_after=1, since=99)
    assert cap.cap_of("a") == 4 and said == ["concurrency: a at most 4 at once (rate limited)"]
    clock.now += 2
    cap.failed("a", reason="rate-limit: x", kind="rate-limit", retry_after=1, since=clock.now)
    clock.now += 2
    cap.failed("a", reason="rate-limit: x", kind="rate-limit", retry_after=1, since=clock.now)
    clock.now += 2
    cap.failed("a", reason="rate-limit: x", kind="rate-limit", retry_after=1, since=clock.now)
    assert cap.cap_of("a") == 1  # never below one
    for t in list(cap.on):
        cap.finished(t)
    assert cap.under_cap("a")
    cap.started("t0", "a")
    assert not cap.under_cap("a")
    for expected in (2, 3, 4, 5, 6, 7):
        cap.worked("a")
        assert cap.cap_of("a") == expected
    cap.worked("a")
    assert cap.cap_of("a") == 8 and "a" not in cap.limit
    assert said[-1] == "concurrency: a back to 8 at once (max_parallel)"


def test_new_tasks_go_back_to_the_primary_when_its_wait_ends() -> None:
    clock = Clock()
    cap = capacity(Plan(name="p", fallback=("b",), tasks=(TASK,)), clock)
    ts = TaskState(id="t")
    cap.failed("a", reason="rate-limit: x", kind="rate-limit", retry_after=30, since=0)
    during = cap.choose(TASK, ts, AgentSpec("a"))
    assert during is not None and during.spec.name == "b"
    clock.now += 30
    after = cap.choose(TASK, ts, AgentSpec("a"))
    assert after is not None and after.spec == AgentSpec("a") and after.why is None
