"""Which agent the next attempt of a task runs on: the escalation policy's spec
(forge/run/next_agent.py), then the one the providers can take now
(forge/run/capacity.py: backoffs, caps, the plan's fallback agents). When a task
has no agent left to run on, the run pauses, saying what a person does about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forge.frozen import frozen
from forge.plan.model import Task
from forge.run.attempt import messages
from forge.run.candidates import Candidates, is_unit, task_of_unit
from forge.run.capacity import Capacity
from forge.run.context import RunContext
from forge.run.dispatch.book import Book
from forge.run.state import events as ev

if TYPE_CHECKING:
    from pathlib import Path

    from forge.agents.spec import AgentSpec
    from forge.run.options import RunOptions


@frozen
class Launch:
    """What the next attempt of a task runs with: an agent spec, or None for a
    shell task (its `run` command); `why`, when the agent is a fallback."""

    spec: AgentSpec | None
    why: str | None = None


@frozen
class Launcher:
    """The agent choice of one dispatch; the escalation notes go in the book."""

    ctx: RunContext
    options: RunOptions
    book: Book
    cands: Candidates
    capacity: Capacity

    def launch_for(self, task: Task) -> Launch | None:
        """What the next attempt runs with; None when the policy says stop."""
        if task.run is not None:
            return Launch(spec=None)
        from forge.run import next_agent as escalate_run

        book = self.book
        ts = self.ctx.state.record(task.id)
        if self.options.agent and book.forced == task.id:
            return Launch(self.ctx.agents.resolve(self.options.agent)[1])
        forced = book.forced == task_of_unit(task.id)
        decision = escalate_run.next_spec(self.ctx, task, ts, forced=forced)
        if decision.spec is None:
            self.ctx.record(ev.Advised(task.id, decision.reason, decision.suggestion))
            book.no_auto.add(task.id)
            if is_unit(task.id):
                self.cands.skipped(task.id)
            book.settled(task.id)
            return None
        if decision.note:
            book.notes[task.id] = decision.note  # said when it starts
        return Launch(decision.spec)

    def now(self, task: Task, launch: Launch) -> Launch | None:
        """The agent `launch` runs on now (its own or a fallback), or None: its
        agents wait out a backoff or are at their cap."""
        if launch.spec is None:
            return launch
        choice = self.capacity.choose(task, self.ctx.state.record(task.id), launch.spec)
        return None if choice is None else Launch(choice.spec, choice.why)

    def primary(self, task: Task) -> AgentSpec | None:
        """The task's own agent spec (before escalation), for capacity questions."""
        if task.run is not None:
            return None
        from forge.run import next_agent as escalate_run

        ts = self.ctx.state.tasks[task.id]
        text = escalate_run.base_spec_text(self.ctx, task, ts)
        return self.ctx.agents.resolve(text)[1]

    def pause_if_stuck(self, task: Task, spec: AgentSpec | None) -> bool:
        """Pause the run when `task` has no agent left to run on in it; whether it did."""
        why = self.capacity.stuck(task, spec) if spec is not None else None
        if why is None:
            return False
        what_now = _what_now(why, self.ctx.plan.name, self.ctx.plan.source)
        self.ctx.record(ev.Paused(messages.infra_paused(why, what_now)))
        return True


def _what_now(why: str, plan: str, source: Path | None) -> str:
    """What a person does about a pause: waiting brings a provider back, not a
    provider that serves another model than the one asked for."""
    if "(model: " not in why:
        return f"run `forge run {plan}` again when it is back"
    record = f"`forge plan {source}`" if source is not None else "`forge plan` of its file"
    return (
        "the provider serves another model than the one asked for: in the plan, ask for "
        "the model it serves (the task's `agent`) or set `strict_model = false`, record "
        f"it with {record}, then `forge run {plan}`"
    )
