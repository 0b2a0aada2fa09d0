"""Which agent spec the next attempt of a task gets: the pure escalation policy
(escalation.py) applied to the task's recorded attempts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forge.frozen import frozen
from forge.plan.model import Plan, Task
from forge.plan.specs import AUTO, DEFAULT_AGENT
from forge.run.state.run_state import Stall, TaskState

if TYPE_CHECKING:
    from forge.agents.spec import AgentSpec
    from forge.run.context import RunContext


@frozen
class NextSpec:
    spec: AgentSpec | None  # None: do not run (split or stop)
    reason: str = ""
    suggestion: str | None = None
    note: str | None = None  # said to the user when the spec moved up the ladder


def base_spec_text(ctx: RunContext, task: Task, ts: TaskState) -> str:
    text = ts.agent or task.agent or ctx.plan.agent or DEFAULT_AGENT
    if text == AUTO:  # chosen from the pool by cost per landed task
        from forge.run.records import routing

        return routing.router_of(ctx).spec_for(task, ts)
    return text


def next_spec(
    ctx: RunContext,
    task: Task,
    ts: TaskState,
    *,
    forced: bool = False,
    base_text: str | None = None,
) -> NextSpec:
    """The next spec on the task's own agent, or on `base_text` (a fallback agent):
    each agent's escalation streak is its own attempts'."""
    from forge.agents import escalation
    from forge.agents import spec as agents

    text = base_text or base_spec_text(ctx, task, ts)
    defn, base = ctx.agents.resolve(text)
    mine = [a for a in ts.attempts if agents.AgentSpec.of(a.agent).name == defn.name]
    if base_text is None and ts.agent and mine and mine[-1].agent != str(base):
        mine = []  # `forge retry --agent` chose a new spec: it starts a fresh streak
    if not mine:
        return NextSpec(base)
    history = [
        escalation.Outcome(
            a.model,
            a.effort,
            escalation.NO_PROGRESS if a.stall == Stall.NO_PROGRESS else str(a.status),
        )
        for a in mine
    ]
    model = mine[-1].model or base.model
    effort = mine[-1].effort or base.effort
    ladder = escalation.Ladder(
        defn.models, defn.efforts, ctx.plan.escalate_after, ctx.plan.escalate_effort
    )
    decision = escalation.next_step(
        history,
        ladder,
        model=model,
        effort=effort,
        retry=f"forge retry {task.id} --plan {ctx.plan.name}",
    )
    if decision.action == "split":
        return NextSpec(
            None,
            reason=decision.reason,
            suggestion=escalation.split_suggestion(
                task.id, history, replan=_replan(ctx.plan, task.id)
            ),
        )
    if decision.action == "stop" and not forced:
        # No automatic retry; `forge retry` runs it with the model and effort named.
        return NextSpec(None, reason=decision.reason)
    spec = agents.AgentSpec(defn.name, decision.model, decision.effort)
    note = None
    if decision.action in ("model", "effort"):
        note = f"escalating to {spec}: {decision.reason}"
    return NextSpec(spec, note=note)


def _replan(plan: Plan, task_id: str) -> str:
    """How the split is recorded, said with a command that runs as written."""
    if plan.source is None:  # a combined plan: recorded, with no file to edit
        return (
            f"in a plan file of their own (`forge split {plan.name} --tasks {task_id} "
            f"--into {task_id}-split` writes one)."
        )
    return f"then run `forge plan {plan.source}` again."
