"""The dispatch loop of a run: what starts when.

A task starts when its dependencies have merged, a slot is free, and no running
task overlaps its files: waves are a view, not a barrier. Among ready tasks the
longest critical path goes first, ties in plan order. The loop is the only thread
that decides; attempts run on worker threads and report back through a queue.
Infrastructure failures wait out a backoff and then pause the run; a hold stops
new starts while running tasks finish.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from forge.agents.names import AgentSpec
from forge.base.text import one_line
from forge.errors import ForgeError
from forge.plan.model import Task
from forge.plan.registry import Recorded
from forge.run.attempt import messages
from forge.run.attempt.context import Asked, Outcome, Remote
from forge.run.attempt.pipeline import run_attempt
from forge.run.budget import Budget
from forge.run.candidates import Candidates, Told, is_unit, task_of_unit
from forge.run.capacity import Capacity
from forge.run.context import RunContext
from forge.run.state import events as ev
from forge.run.state import hold as holds
from forge.run.state.records import ReviewVerdict
from forge.run.state.run_state import FAILURES, REDISPATCH, Stall, Status

if TYPE_CHECKING:
    from pathlib import Path

    from forge.agents.spec import AgentSpec
    from forge.run.gate.landing import Gate
    from forge.run.options import RunOptions

INFRA_BACKOFF_CAP = 300.0


@dataclass(frozen=True)
class Launch:
    """What the next attempt of a task runs with: an agent spec, or None for a
    shell task (its `run` command)."""

    spec: AgentSpec | None


class Dispatcher:
    """Decides what starts when. Only the loop thread changes dispatch decisions."""

    def __init__(
        self,
        ctx: RunContext,
        recorded: Recorded,
        options: RunOptions,
        on_event: Callable[[str], None],
        gate: Gate | None = None,
        remote: Remote | None = None,
    ) -> None:
        from forge.plan import dag

        self.ctx = ctx
        self.plan = ctx.plan
        self.options = options
        self.on_event = on_event
        self.max_parallel = options.max_parallel or self.plan.max_parallel
        self.order = {t.id: i for i, t in enumerate(self.plan.tasks)}
        self.cp = dict(recorded.critical_path) or dag.critical_path(self.plan)
        self.overlaps = dag.task_overlaps(self.plan)
        self.done: queue.Queue[tuple[str, Outcome | None]] = queue.Queue()
        ctx.slots.on_ready = lambda: self.done.put(("", None))
        self.gate = gate  # verifies QUEUED tasks and lands them (None: tasks merge)
        self.remote = remote  # where attempts run when not here: a cluster (forge.cluster)
        if gate is not None:
            gate.wake = lambda: self.done.put(("", None))
        self.notes: dict[str, str] = {}  # escalation notes, said when the task starts
        self.running: set[str] = set()
        self.retries: dict[str, int] = {}  # failed-task retries spent in this run
        self.not_before: dict[str, float] = {}  # backoff after an infrastructure failure
        self.since: dict[str, float] = {}  # when each running task started
        self.capacity = Capacity(
            ctx,
            retries=options.infra_retries,
            backoff=ctx.settings.infra_backoff,  # doubled each time
            cap=INFRA_BACKOFF_CAP,
            on_event=on_event,
        )
        self.no_auto: set[str] = set()  # tasks the policy says not to retry automatically
        self.fatal: ForgeError | None = None  # an attempt could not start: the run stops
        self.forced = options.only  # `forge retry`: dispatch it even though it failed
        self.budget = Budget.of(ctx, options.budget)
        from forge.run.state.replan import LivePlan

        self.live = LivePlan(ctx.repo, self.plan.name)  # `forge plan` while this runs
        self.cands = Candidates(  # best-of-N: candidates run as units of their own
            ctx,
            gate=gate,
            retries=self.retries,
            running=self.running,
            told=Told(
                on_event,
                on_settled=lambda tid: (
                    setattr(self, "forced", None) if self.forced == tid else None
                ),
                wake=lambda: self.done.put(("", None)),
            ),
        )

    def loop(self) -> None:
        state = self.ctx.state
        with ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="task") as pool:
            while True:
                self._drain(block=False)
                self.cands.poll()
                if self.ctx.stop.is_set() or self.fatal is not None:
                    break
                self.live.open()  # a `forge plan` checks against what this starts
                self._take_up()
                held = holds.active(self.ctx.repo.state, self.plan.name)
                if held is not None and self._ready():
                    # Only a hold that keeps something from starting pauses the run.
                    why = messages.held(held.describe(), held.resume)
                    self.ctx.apply(ev.Paused(why))
                if not state.paused and self.budget.spent_out() and self._ready():
                    self.ctx.apply(ev.Paused(self.budget.describe()))
                if not state.paused:
                    self._mark_blocked()
                    self._dispatch(pool)
                idle = not self.running and (bool(state.paused) or not self._waiting())
                idle = idle and not self.cands.busy()  # (a best-of-N selection runs)
                if self.gate is not None:
                    # `end`: the gate starts once nothing else can start before it lands
                    # (what waits, waits for a dependency or an overlapping task to land).
                    self.gate.release(not self.running)
                    idle = idle and self.gate.idle()
                self.live.close(self.running, finished=idle)
                if idle:
                    break
                self._drain(block=True)
            if self.running:  # stopped: the attempts see the event and end
                while self.running:
                    self._drain(block=True)
        self.live.close(self.running, finished=True)
        self.cands.close()
        if not self.ctx.state.paused and not self.ctx.stop.is_set() and self.fatal is None:
            self._mark_blocked()
        self.ctx.save()
        if self.fatal is not None:
            raise self.fatal

    def _take_up(self) -> None:
        """A newer version of the plan, recorded by `forge plan` while this runs."""
        recorded = self.live.newer()
        if recorded is None or recorded.plan.to_dict() == self.plan.to_dict():
            return
        from forge.plan import dag
        from forge.run.state import replan

        plan = recorded.plan
        change = replan.diff(self.plan, plan)
        notes = replan.take_up(
            self.ctx.repo, plan, self.ctx.state, self.ctx.store, running=self.running
        )
        self.plan = self.ctx.plan = plan
        self.order = {t.id: i for i, t in enumerate(plan.tasks)}
        self.cp = dict(recorded.critical_path) or dag.critical_path(plan)
        self.overlaps = dag.task_overlaps(plan)
        for tid in change.dropped:  # per-task bookkeeping of tasks that are gone
            self.retries.pop(tid, None)
            self.not_before.pop(tid, None)
            self.notes.pop(tid, None)
            self.no_auto.discard(tid)
        self.on_event(f"plan '{plan.name}' recorded again; taking up: {change.describe()}")
        for note in notes:
            self.on_event(note)

    # -- decisions -------------------------------------------------------------

    def _deps_merged(self, task: Task) -> bool:
        return all(self.ctx.state.tasks[d].status == Status.MERGED for d in task.deps)

    def _eligible(self, task: Task) -> bool:
        ts = self.ctx.state.tasks[task.id]
        if task.id in self.running or ts.status == Status.MERGED:
            return False
        if self.options.only and task.id != self.options.only:
            return False
        if not self._deps_merged(task):
            return False
        in_round = self.cands.eligible(task)
        if in_round is not None:  # a best-of-N task whose candidates are under way
            return in_round
        if task.id in self.no_auto:  # the policy said stop (split, or no progress)
            return False
        if ts.status == Status.INFRA:
            # With fallback agents it may start at once, elsewhere (capacity decides).
            return bool(self.plan.fallback) or time.monotonic() >= self.not_before.get(task.id, 0.0)
        if ts.status in REDISPATCH:
            return True
        if self.forced == task.id:
            return True
        return ts.status in FAILURES and self.retries.get(task.id, 0) < self.options.retry_failed

    def _ready(self) -> list[Task]:
        ready = [t for t in self.plan.tasks if self._eligible(t)]
        ready.sort(key=lambda t: (-self.cp.get(t.id, 1.0), self.order[t.id]))
        return ready

    def _launch_for(self, task: Task) -> Launch | None:
        """What the next attempt runs with; None when the policy says stop."""
        if task.run is not None:
            return Launch(spec=None)
        from forge.agents import spec as agents
        from forge.run import next_agent as escalate_run

        ts = self.ctx.state.record(task.id)
        if self.options.agent and self.forced == task.id:
            return Launch(agents.resolve(self.options.agent, self.ctx.agent_defs)[1])
        forced = self.forced == task_of_unit(task.id)
        decision = escalate_run.next_spec(self.ctx, task, ts, forced=forced)
        if decision.spec is None:
            self.ctx.emit(ev.Advised(task.id, decision.reason, decision.suggestion))
            self.no_auto.add(task.id)
            if is_unit(task.id):
                self.cands.skipped(task.id)
            if self.forced == task.id:
                self.forced = None
            return None
        if decision.note:
            self.notes[task.id] = decision.note  # said when it starts
        return Launch(decision.spec)

    def _primary(self, task: Task) -> AgentSpec | None:
        """The task's own agent spec (before escalation), for capacity questions."""
        if task.run is not None:
            return None
        from forge.agents import spec as agents
        from forge.run import next_agent as escalate_run

        ts = self.ctx.state.tasks[task.id]
        text = escalate_run.base_spec_text(self.ctx, task, ts)
        return agents.resolve(text, self.ctx.agent_defs)[1]

    def _worked(self, tid: str, ran_on: str) -> None:
        """An attempt ran on `ran_on` (and its reviewer judged it): both providers work."""
        self.capacity.worked(ran_on)
        last = self.ctx.state.record(tid).last
        review = last.review if last is not None else None
        if review and review.verdict in (ReviewVerdict.APPROVE, ReviewVerdict.REJECT):
            self.capacity.worked(AgentSpec.of(review.agent).name)

    def _overlaps_running(self, tid: str) -> bool:
        # A QUEUED task's work is not on integration yet: a task overlapping it waits
        # for it to land, so that its base holds that work (else it would conflict).
        tasks = self.ctx.state.tasks
        running = {task_of_unit(t) for t in self.running}  # (a candidate: its task's files)
        return any(
            other in running or tasks[other].status == Status.QUEUED
            for other in self.overlaps.get(task_of_unit(tid), ())
        )

    def _waiting(self) -> bool:
        """Is anything still to be started (now or after a backoff)?"""
        return any(self._eligible(t) for t in self.plan.tasks) or any(
            self.ctx.state.tasks[t].status == Status.INFRA and t not in self.running
            for t in self.not_before
        )

    def _mark_blocked(self) -> None:
        state = self.ctx.state
        changed = False
        for task in self.plan.tasks:
            ts = state.tasks[task.id]
            if ts.status not in (Status.PENDING, Status.BLOCKED) or task.id in self.running:
                continue
            bad = [d for d in task.deps if state.tasks[d].status != Status.MERGED]
            blocked_by = [d for d in bad if self._finally_unmerged(d)]
            if blocked_by and ts.status != Status.BLOCKED:
                d = blocked_by[0]
                why = messages.dependency_not_merged(d, state.tasks[d].status)
                self.ctx.apply(ev.Blocked(task.id, why))
                changed = True
            elif not bad and ts.status == Status.BLOCKED:
                self.ctx.apply(ev.Unblocked(task.id))
                changed = True
        if changed:
            self.ctx.save()

    def _finally_unmerged(self, tid: str) -> bool:
        """Will `tid` stay unmerged for the rest of this run?"""
        ts = self.ctx.state.tasks[tid]
        if ts.status in (Status.MERGED, Status.QUEUED, Status.RUNNING) or tid in self.running:
            return False  # (a QUEUED task lands, or fails and says so: not final yet)
        if ts.status == Status.BLOCKED:
            return True
        task = self.plan.find_task(tid)
        if task is None:
            return True
        if ts.status in (Status.PENDING, Status.INTERRUPTED, Status.INFRA):
            # Pending work is not a failure: only a dependency that failed blocks.
            return any(self._finally_unmerged(d) for d in task.deps)
        return not self._eligible(task)

    # -- running ---------------------------------------------------------------

    def _dispatch(self, pool: ThreadPoolExecutor) -> None:
        slots = self.ctx.slots
        waiting = 0  # ready tasks that found no slot ready
        for task in self.cands.expand(self._ready()):
            if len(self.running) + waiting >= self.max_parallel:
                break
            if self._overlaps_running(task.id):
                continue
            launch = self._launch_for(task)
            if launch is None:
                continue
            spec, why = launch.spec, None
            if spec is not None:
                choice = self.capacity.choose(task, self.ctx.state.record(task.id), spec)
                if choice is None:  # its agents wait out a backoff, or are at their cap
                    stuck = self.capacity.stuck(task, spec)
                    if stuck is not None:
                        self._pause(stuck)
                        return
                    continue
                spec, why = choice.spec, choice.why
            if self.remote is not None or slots.reserve(task.id) or slots.error is not None:
                # (with an error, the attempt makes its slot itself, or fails saying why)
                self._start(pool, task, spec, why=why)
            else:
                waiting += 1
        if waiting:
            base = self.ctx.repo.ref_value(self.ctx.state.integration)
            if base:
                slots.grow(base, wanted=waiting)

    def _pause(self, why: str) -> None:
        what_now = _what_now(why, self.plan.name, self.plan.source)
        self.ctx.emit(ev.Paused(messages.infra_paused(why, what_now)))

    def _start(
        self,
        pool: ThreadPoolExecutor,
        task: Task,
        spec: AgentSpec | None,
        *,
        why: str | None = None,
    ) -> None:
        ts = self.ctx.state.record(task.id)
        if ts.status in FAILURES:
            self.retries[task.id] = self.retries.get(task.id, 0) + 1
        if self.forced == task.id:
            self.forced = None
        self.running.add(task.id)
        fresh = self.options.fresh and self.options.only == task.id
        person = self.options.only == task.id  # `forge retry TASK`
        note = self.notes.pop(task.id, None)
        if note:
            self.on_event(f"{task.id}: {note}")
        self.on_event(
            f"{task.id}: started"
            + (f" ({spec})" if spec is not None else "")
            + (f" [{why}]" if why else "")
        )
        self.since[task.id] = time.monotonic()
        if spec is not None:
            self.capacity.started(task.id, spec.name)
        ctx = self.cands.context(task.id)
        if is_unit(task.id):
            self.cands.started(task.id)

        counted = len(ts.attempts)

        def work() -> None:
            try:
                outcome = run_attempt(
                    ctx,
                    task,
                    spec=spec,
                    asked=Asked(fresh=fresh, fallback=why, person=person),
                    remote=self.remote,
                )
            except Exception as exc:  # noqa: BLE001 never let a worker die silently: the loop waits for it
                outcome = Outcome(Status.FAILED, messages.forge_error(exc))
                if len(ts.attempts) == counted:
                    # No attempt was counted (its logs folder cannot be made, ...): the
                    # next dispatch would fail the same way at once, forever. Stop.
                    self.fatal = ForgeError(
                        f"cannot start an attempt of {task.id}: {one_line(str(exc))}"
                    )
            except BaseException:
                # Ctrl-C or SystemExit is a stop, not a failed task (the attempt
                # recorded itself INTERRUPTED): stop the run, let the loop see it end.
                self.ctx.stop.set()
                self.done.put((task.id, Outcome(Status.INTERRUPTED, messages.FORGE_STOPPED)))
                raise
            self.done.put((task.id, outcome))

        pool.submit(work)

    def _drain(self, *, block: bool) -> None:
        try:
            item = self.done.get(timeout=0.2) if block else self.done.get_nowait()
        except queue.Empty:
            return
        while True:
            tid, outcome = item
            if outcome is not None:  # None: a slot became ready, look again
                self.running.discard(tid)
                self._after(tid, outcome)
            try:
                item = self.done.get_nowait()
            except queue.Empty:
                return

    def _after(self, tid: str, outcome: Outcome) -> None:
        if self.fatal is not None and self.fatal.message.startswith(
            f"cannot start an attempt of {tid}:"
        ):
            self.capacity.finished(tid)  # it never ran: said once, by the run's end
            return
        self.budget.add(self.ctx.state.record(tid).last)
        if not is_unit(tid):  # (a candidate's end is told by forge/run/candidates.py)
            self.on_event(
                f"{tid}: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else "")
            )
        ran_on = self.capacity.finished(tid)
        since = self.since.pop(tid, 0.0)
        if is_unit(tid):
            self.cands.finished(tid, outcome)  # what it makes of its task
        elif outcome.status == Status.QUEUED and self.gate is not None:
            self.gate.submit(tid)
        if outcome.status == Status.INFRA:
            name = outcome.infra_agent or ran_on
            if name is None:
                return
            wait = self.capacity.failed(
                name,
                reason=outcome.reason,
                kind=outcome.infra_kind,
                retry_after=outcome.infra_retry_after,
                since=since,
            )
            if is_unit(tid):
                return
            if wait is not None:
                self.not_before[tid] = time.monotonic() + wait
            task = self.plan.task(tid)
            primary = self._primary(task)
            stuck = self.capacity.stuck(task, primary) if primary is not None else None
            if stuck is not None:
                self._pause(stuck)
            return
        if ran_on is not None and outcome.status != Status.INTERRUPTED:
            self._worked(tid, ran_on)
        if outcome.stall == Stall.NO_PROGRESS or (
            outcome.stall == Stall.NO_CHANGES and len(self.ctx.state.record(tid).attempts) > 1
        ):
            # Work that makes no progress is not retried automatically (a retry that
            # changes nothing, or changes the same thing again).
            self.no_auto.add(tid)


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
