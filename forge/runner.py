"""Run (or resume) a recorded plan: recover, dispatch, merge, verify, report.

The dispatch loop is the only thread that decides; attempts run on worker threads
and report back through a queue. A task starts when its dependencies have merged,
a slot is free, and no running task overlaps its files: waves are a view, not a
barrier. Among ready tasks the longest critical path goes first.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge import hold as holds
from forge import proc, recovery, worktrees
from forge.attempt import Outcome, RunContext, run_attempt
from forge.errors import ExitCode, ForgeError
from forge.git import Repository
from forge.integrate import ensure_integration
from forge.plan import Plan, Task
from forge.registry import Recorded
from forge.runstate import FAILURES, REDISPATCH, RunState, StateStore, Status, now_iso
from forge.slots import SlotPool
from forge.state import plan_lock

# First wait after an infrastructure failure, doubled each time (FORGE_INFRA_BACKOFF).
INFRA_BACKOFF = float(os.environ.get("FORGE_INFRA_BACKOFF", "5"))
INFRA_BACKOFF_CAP = 300.0


@dataclass(frozen=True)
class RunOptions:
    max_parallel: int | None = None
    retry_failed: int = 0
    infra_retries: int = 3
    worktree_root: Path | None = None
    only: str | None = None  # `forge retry TASK`: run just this task
    fresh: bool = False
    agent: str | None = None  # `forge retry --agent SPEC`
    verify: bool = True


@dataclass
class RunReport:
    plan: str
    state: RunState
    exit_code: ExitCode
    logs: Path
    integration_head: str | None
    verification: dict[str, Any] | None = None
    paused: str | None = None
    recovered: list[str] = field(default_factory=list)
    interrupted: bool = False


def agent_defs(repo: Repository, plan: Plan) -> dict[str, Mapping[str, Any]]:
    from forge.config import load_repo_config

    defs: dict[str, Mapping[str, Any]] = dict(load_repo_config(repo.root).agents)
    defs.update(plan.agents)  # the plan's own definitions win
    return defs


def verify_config(repo: Repository, plan: Plan) -> Any:
    from forge.config import load_repo_config

    return plan.verify if plan.verify is not None else load_repo_config(repo.root).verify


def run_plan(
    repo: Repository,
    recorded: Recorded,
    options: RunOptions,
    *,
    stop: threading.Event,
    on_change: Callable[[RunState, str], None] = lambda _s, _t: None,
    on_event: Callable[[str], None] = lambda _m: None,
) -> RunReport:
    plan = recorded.plan
    from forge.escalate_run import check_specs

    defs = agent_defs(repo, plan)
    check_specs(plan, defs)  # forge.toml may have changed since `forge plan`
    # Orphaned grandchildren of agents re-parent to forge, so a stopped group can be
    # reaped to the last process instead of lingering as zombies of init.
    proc.become_subreaper()
    with plan_lock(repo.state, plan.name, command="forge run") as owner:
        store = StateStore(repo.state, plan.name)
        state = store.load([t.id for t in plan.tasks])
        for tid in list(state.tasks):  # a task dropped from the plan since: forget it
            if plan_task(plan, tid) is None and state.tasks[tid].status != Status.MERGED:
                del state.tasks[tid]
        state.started = now_iso()
        state.finished = None
        state.paused = None
        started = time.monotonic()
        integration = ensure_integration(repo, state.integration, recorded.base_commit)
        store.save(state)
        logs = repo.state.logs_dir(plan.name)
        root = repo.worktrees_root(options.worktree_root) / plan.name
        report = RunReport(plan.name, state, ExitCode.OK, logs, integration)
        try:
            report.recovered = recovery.recover(repo, plan, state, store, on_event=on_event)
            if options.agent and options.only:
                state.tasks[options.only].agent = options.agent
                store.save(state)
            slots = SlotPool(repo, root, state, store, clean_all=plan.clean == "all")
            slots.free_merged()
            ctx = RunContext(
                repo=repo,
                plan=plan,
                state=state,
                store=store,
                slots=slots,
                logs=logs,
                stop=stop,
                agent_defs=defs,
                owner=owner.to_dict(),
                on_change=lambda tid: on_change(state, tid),
            )
            Dispatcher(ctx, recorded, options, on_event).loop()
            report.paused = state.paused
            report.integration_head = repo.ref_value(state.integration)
            if stop.is_set():
                report.interrupted = True
            elif options.verify and report.integration_head and not state.paused:
                report.verification = _verify(repo, plan, report.integration_head, stop, on_event)
                state.verification = report.verification
                if stop.is_set():
                    report.interrupted = True
        finally:
            for slot in state.slots.values():  # measured here so `forge status` stays fast
                path = Path(slot.path)
                slot.bytes = worktrees.disk_usage(path) if path.exists() else 0
            state.finished = now_iso()
            state.wall_seconds = round(time.monotonic() - started, 3)
            store.save(state)
        report.exit_code = exit_code(plan, state, report, only=options.only)
        return report


def plan_task(plan: Plan, tid: str) -> Task | None:
    return next((t for t in plan.tasks if t.id == tid), None)


def _verify(
    repo: Repository, plan: Plan, head: str, stop: threading.Event, on_event: Callable[[str], None]
) -> dict[str, Any]:
    from forge import verify

    record = verify.verify_commit(
        repo, head, verify_config(repo, plan), key=plan.name, stop=stop, on_event=on_event
    )
    data: dict[str, Any] = record.to_dict()
    return data


def exit_code(plan: Plan, state: RunState, report: RunReport, *, only: str | None) -> ExitCode:
    if report.interrupted:
        return ExitCode.INTERRUPTED
    if state.paused:
        return ExitCode.PAUSED
    tasks = [state.tasks[only]] if only else list(state.tasks.values())
    if any(t.suggestion and t.status != Status.MERGED for t in tasks):
        return ExitCode.SPLIT
    if any(t.status != Status.MERGED for t in tasks):
        return ExitCode.FAILED
    verdict = (report.verification or {}).get("verdict")
    if verdict == "FAIL":
        return ExitCode.FAILED
    if verdict == "INTERRUPTED":
        return ExitCode.INTERRUPTED
    return ExitCode.OK


class Dispatcher:
    """Decides what starts when. Only the loop thread changes dispatch decisions."""

    def __init__(
        self,
        ctx: RunContext,
        recorded: Recorded,
        options: RunOptions,
        on_event: Callable[[str], None],
    ) -> None:
        from forge import dag

        self.ctx = ctx
        self.plan = ctx.plan
        self.options = options
        self.on_event = on_event
        self.max_parallel = options.max_parallel or self.plan.max_parallel
        self.order = {t.id: i for i, t in enumerate(self.plan.tasks)}
        self.cp = dict(recorded.critical_path) or dag.critical_path(self.plan)
        self.overlaps = dag.task_overlaps(self.plan)
        self.done: queue.Queue[tuple[str, Outcome]] = queue.Queue()
        self.running: set[str] = set()
        self.retries: dict[str, int] = {}  # failed-task retries spent in this run
        self.infra: dict[str, int] = {}  # infrastructure retries spent in this run
        self.not_before: dict[str, float] = {}  # backoff after an infrastructure failure
        self.no_auto: set[str] = set()  # tasks the policy says not to retry automatically
        self.forced = options.only  # `forge retry`: dispatch it even though it failed

    def loop(self) -> None:
        state = self.ctx.state
        with ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="task") as pool:
            while True:
                self._drain(block=False)
                if self.ctx.stop.is_set():
                    break
                held = holds.active(self.ctx.repo.state, self.plan.name)
                if held is not None:
                    state.paused = f"hold: {held.describe()}"
                if not state.paused:
                    self._mark_blocked()
                    for task in self._ready():
                        if len(self.running) >= self.max_parallel:
                            break
                        if self._overlaps_running(task.id):
                            continue
                        spec = self._spec_for(task)
                        if spec is not False:
                            self._start(pool, task, spec)
                if not self.running and (state.paused or not self._waiting()):
                    break
                self._drain(block=True)
            if self.running:  # stopped: the attempts see the event and end
                while self.running:
                    self._drain(block=True)
        if not self.ctx.state.paused and not self.ctx.stop.is_set():
            self._mark_blocked()
        self.ctx.save()

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
        if ts.status == Status.INFRA:
            return time.monotonic() >= self.not_before.get(task.id, 0.0)
        if ts.status in REDISPATCH:
            return True
        if task.id in self.no_auto:
            return False
        if self.forced == task.id:
            return True
        return ts.status in FAILURES and self.retries.get(task.id, 0) < self.options.retry_failed

    def _ready(self) -> list[Task]:
        ready = [t for t in self.plan.tasks if self._eligible(t)]
        ready.sort(key=lambda t: (-self.cp.get(t.id, 1.0), self.order[t.id]))
        return ready

    def _spec_for(self, task: Task) -> Any:
        """The agent spec for the next attempt; False when the policy says stop."""
        if task.run is not None:
            return None
        from forge import agents, escalate_run

        ts = self.ctx.state.tasks[task.id]
        if self.options.agent and self.forced == task.id:
            return agents.resolve(self.options.agent, self.ctx.agent_defs)[1]
        decision = escalate_run.next_spec(self.ctx, task, ts)
        if decision.spec is None:
            with self.ctx.store.lock:
                if decision.suggestion:
                    ts.suggestion = decision.suggestion
                ts.reason = ts.reason or decision.reason
                self.ctx.save(task.id)
            self.no_auto.add(task.id)
            if self.forced == task.id:
                self.forced = None
            return False
        if decision.note:
            self.on_event(f"{task.id}: {decision.note}")
        return decision.spec

    def _overlaps_running(self, tid: str) -> bool:
        return any(other in self.running for other in self.overlaps.get(tid, ()))

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
                ts.status = Status.BLOCKED
                ts.reason = f"dependency {d} did not merge ({state.tasks[d].status})"
                changed = True
            elif not bad and ts.status == Status.BLOCKED:
                ts.status, ts.reason = Status.PENDING, ""
                changed = True
        if changed:
            self.ctx.save()

    def _finally_unmerged(self, tid: str) -> bool:
        """Will `tid` stay unmerged for the rest of this run?"""
        ts = self.ctx.state.tasks[tid]
        if ts.status == Status.MERGED or tid in self.running:
            return False
        if ts.status == Status.BLOCKED:
            return True
        task = plan_task(self.plan, tid)
        if task is None:
            return True
        if ts.status in (Status.PENDING, Status.INTERRUPTED, Status.INFRA):
            # Pending work is not a failure: only a dependency that failed blocks.
            return any(self._finally_unmerged(d) for d in task.deps)
        return not self._eligible(task)

    # -- running ---------------------------------------------------------------

    def _start(self, pool: ThreadPoolExecutor, task: Task, spec: Any) -> None:
        ts = self.ctx.state.tasks[task.id]
        if ts.status in FAILURES:
            self.retries[task.id] = self.retries.get(task.id, 0) + 1
        if self.forced == task.id:
            self.forced = None
        self.running.add(task.id)
        fresh = self.options.fresh and self.options.only == task.id
        self.on_event(f"{task.id}: started" + (f" ({spec})" if spec is not None else ""))

        def work() -> None:
            try:
                outcome = run_attempt(self.ctx, task, spec=spec, fresh=fresh)
            except BaseException as exc:  # never let a worker die silently
                outcome = Outcome(Status.FAILED, f"forge error: {exc}")
            self.done.put((task.id, outcome))

        pool.submit(work)

    def _drain(self, *, block: bool) -> None:
        try:
            item = self.done.get(timeout=0.2) if block else self.done.get_nowait()
        except queue.Empty:
            return
        while True:
            tid, outcome = item
            self.running.discard(tid)
            self._after(tid, outcome)
            try:
                item = self.done.get_nowait()
            except queue.Empty:
                return

    def _after(self, tid: str, outcome: Outcome) -> None:
        self.on_event(
            f"{tid}: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else "")
        )
        if outcome.status == Status.INFRA:
            n = self.infra.get(tid, 0) + 1
            self.infra[tid] = n
            if n > self.options.infra_retries or outcome.infra_kind == "binary-missing":
                with self.ctx.store.lock:
                    self.ctx.state.paused = (
                        f"infrastructure: {outcome.reason} (after {n - 1} retries); "
                        "run `forge run` again when it is back"
                    )
                    self.ctx.save()
                return
            wait = outcome.infra_retry_after
            if wait is None:
                wait = min(INFRA_BACKOFF_CAP, INFRA_BACKOFF * 2 ** (n - 1))
            self.not_before[tid] = time.monotonic() + min(wait, INFRA_BACKOFF_CAP)
        elif outcome.reason.startswith("no progress") or (
            outcome.reason.startswith("no changes") and len(self.ctx.state.tasks[tid].attempts) > 1
        ):
            # Work that makes no progress is not retried automatically (a retry that
            # changes nothing, or changes the same thing again).
            self.no_auto.add(tid)


def run_error_if_unknown(plan: Plan, task: str) -> None:
    if plan_task(plan, task) is None:
        known = ", ".join(t.id for t in plan.tasks)
        raise ForgeError(f"unknown task '{task}' in plan '{plan.name}' (tasks: {known})")


def check_retry(repo: Repository, plan: Plan, task: str, *, agent: str | None) -> None:
    """Refuse, changing nothing, a retry that cannot run: an unknown or merged task,
    a dependency that has not merged, an agent spec that does not resolve."""
    run_error_if_unknown(plan, task)
    state = StateStore(repo.state, plan.name).load_existing()
    ts = state.tasks.get(task) if state else None
    if ts is not None and ts.status == Status.MERGED:
        raise ForgeError(f"task '{task}' has already merged; nothing to retry")
    t = plan_task(plan, task)
    assert t is not None
    for dep in t.deps:
        dst = state.tasks.get(dep) if state else None
        if dst is None or dst.status != Status.MERGED:
            status = dst.status if dst else Status.PENDING
            raise ForgeError(
                f"task '{task}' depends on '{dep}', which has not merged ({status}); "
                f"retry '{dep}' first"
            )
    if agent is not None:
        if t.run is not None:
            raise ForgeError(f"task '{task}' is a shell task (`run`): it takes no agent")
        from forge import agents

        agents.resolve(agent, agent_defs(repo, plan))
