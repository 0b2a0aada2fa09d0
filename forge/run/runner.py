"""Run (or resume) a recorded plan: lock, recover, dispatch (forge/run/dispatch/),
verify the integration head, and say how it ended (the exit code)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from forge.agents.book import AgentBook
from forge.base import box, sandbox
from forge.base.clock import now_iso
from forge.base.files import DiskFull, is_full, plan_lock
from forge.errors import ExitCode, ForgeError
from forge.frozen import frozen
from forge.git import gitfiles, snapshot, worktrees
from forge.git.merge import ensure_integration
from forge.git.repo import Repository
from forge.git.snapshot import Snapshot
from forge.plan.model import Gate as GateMode
from forge.plan.model import Plan
from forge.plan.registry import Recorded
from forge.plan.repo_config import VerifyConfig
from forge.run.attempt import messages
from forge.run.attempt.context import Remote
from forge.run.context import RunContext
from forge.run.options import RunOptions
from forge.run.state import accepted, reconcile, recovery
from forge.run.state import events as ev
from forge.run.state.run_state import KEPT, RunState, Status
from forge.run.state.slots import SlotPool
from forge.run.state.store import StateStore
from forge.verify.records import Verdict, VerifyRecord

if TYPE_CHECKING:
    from forge.run.gate.landing import Gate


@dataclass
class RunReport:
    plan: str
    state: RunState
    exit_code: ExitCode
    logs: Path
    integration_head: str | None
    verification: VerifyRecord | None = None
    paused: str | None = None
    recovered: list[str] = field(default_factory=list)
    interrupted: bool = False
    gate_runs: int | None = None  # verifications the gate ran (None: no gate)
    gate_subset_runs: int | None = None  # its runs of some tests only


def agent_defs(repo: Repository, plan: Plan) -> dict[str, Mapping[str, object]]:
    from forge.plan.repo_config import load_repo_config

    return plan.agent_tables(load_repo_config(repo.root).agents)


@frozen
class Around:
    """What surrounds a run: who is told when a task changes and of each event (the
    live view), and where attempts run when not here (a cluster, per plan)."""

    on_change: Callable[[RunState, str], None] = lambda _s, _t: None
    on_event: Callable[[str], None] = lambda _m: None
    remote: Callable[[Plan], contextlib.AbstractContextManager[Remote]] | None = None


def run_plan(
    repo: Repository,
    recorded: Recorded,
    options: RunOptions,
    *,
    stop: threading.Event,
    around: Around = Around(),
) -> RunReport:
    plan = recorded.plan
    on_change, on_event = around.on_change, around.on_event
    choice = sandbox.choose(options.sandbox, plan.sandbox)
    boxed = choice.on
    if choice.said is not None:
        on_event(choice.said)
    from forge.plan.repo_config import load_repo_config
    from forge.plan.specs import check_specs

    # Read once: the whole run goes by what forge.toml said at its start.
    repo_config = options.repo_config or load_repo_config(repo.root)
    defs = plan.agent_tables(repo_config.agents)
    # forge.toml may have changed since `forge plan`
    check_specs(plan, defs, pool=repo_config.auto)
    # Orphaned grandchildren of agents re-parent to forge, so a stopped group can be
    # reaped to the last process instead of lingering as zombies of init.
    box.become_subreaper()
    with plan_lock(repo.state, plan.name, command="forge run") as owner:
        store = StateStore(repo.state, plan.name)
        started = time.monotonic()
        before = snapshot.take(repo)
        accepted.forget(repo.state, plan.name)
        state, integration = _open_state(repo, recorded, store)
        # before any task runs: a run killed from here on is put back by the next
        kept = gitfiles.keep_for_run(repo, repo.state.plan_dir(plan.name))
        store.record(state, ev.Touched(None), later=True)
        logs = repo.state.logs_dir(plan.name)
        report = RunReport(plan.name, state, ExitCode.OK, logs, integration)
        try:
            report.recovered = _recover(repo, plan, state, store, options, on_event)
            slots = SlotPool(
                repo, repo.worktrees_root() / plan.name, state, store, clean_all=plan.clean == "all"
            )
            slots.free_merged()
            config = plan.verify_under(repo_config) if options.verify else None
            mode = gate_mode(plan, config)
            ctx = RunContext(
                repo=repo,
                plan=plan,
                state=state,
                store=store,
                slots=slots,
                logs=logs,
                stop=stop,
                agents=AgentBook.of(defs),
                owner=owner,
                repo_config=repo_config,
                on_change=lambda tid: on_change(state, tid),
                gated=mode != "off",
                sandbox=boxed,
                kept=kept,
            )
            if mode == "off":
                report.recovered += _merge_left_queued(ctx, on_event)
            # The view draws from the state it is given: a resumed run whose tasks all
            # wait for the gate changes none before its first verdict.
            for tid in list(state.tasks)[:1]:
                on_change(state, tid)
            gate = _dispatch(ctx, recorded, options, integration, config, around)
            _conclude(ctx, report, options, gate=gate, on_event=on_event)
        except Exception as exc:
            if not is_full(exc):
                _close_state(repo, state, store, started, before, kept)
                raise
            # The disk is full: what can still be written is, and the pause (which
            # names the folder) is what the person reads, not the next write's error.
            with contextlib.suppress(OSError, ForgeError):
                _close_state(repo, state, store, started, before, kept)
            if isinstance(exc, DiskFull):
                raise
            raise DiskFull(exc, resume="`forge run`", where=repo.state.root) from exc
        except BaseException:
            _close_state(repo, state, store, started, before, kept)
            raise
        else:
            _close_state(repo, state, store, started, before, kept)
        report.exit_code = exit_code(state, report, only=options.only)
        return report


def gate_mode(plan: Plan, config: VerifyConfig | None) -> GateMode:
    """How work lands: through the gate only when there is a verification to pass."""
    if config is None or not config.lanes:
        return "off"
    return plan.gate


def _open_state(repo: Repository, recorded: Recorded, store: StateStore) -> tuple[RunState, str]:
    """The plan's run state, stamped as started, and its integration head (the
    branch created at the plan's base on first use)."""
    had_state = store.load_existing() is not None
    state = store.load([t.id for t in recorded.plan.tasks])
    reconcile.check_integration_is_ours(repo, recorded.plan.name, state if had_state else None)
    store.record(state, ev.RunStarted(now_iso(), KEPT), later=True)
    existed = repo.ref_value(state.integration) is not None
    integration = ensure_integration(repo, state.integration, recorded.base_commit)
    if not existed:
        _forget_lost_merges(store, state)
    store.save(state)
    return state, integration


def _merge_left_queued(ctx: RunContext, on_event: Callable[[str], None]) -> list[str]:
    """Tasks an earlier run left QUEUED when there is no gate now (`gate = "off"`,
    or no verification any more): they merge as tasks do without a gate."""
    from forge.run.attempt.merging import merge_and_record

    notes = []
    for ts in list(ctx.state.tasks.values()):
        last = ts.last
        if ts.status != Status.QUEUED or last is None or last.commit is None:
            continue
        verdict = merge_and_record(ctx, ctx.plan.task(ts.id), last.commit)
        outcome = "merged" if isinstance(verdict, ev.Merged) else verdict.reason
        notes.append(f"{ts.id}: was queued for a gate that is off now: {outcome}")
    for note in notes:
        on_event(note)
    return notes


def _recover(
    repo: Repository,
    plan: Plan,
    state: RunState,
    store: StateStore,
    options: RunOptions,
    on_event: Callable[[str], None],
) -> list[str]:
    """What an earlier run left: crash recovery, tasks dropped from the plan since;
    then `forge retry --agent`'s choice. Returns the notes said to the user."""
    recovered = recovery.recover(repo, plan, state, store, on_event=on_event)
    for tid in list(state.tasks):  # a task dropped from the plan since
        if plan.find_task(tid) is None and state.tasks[tid].status != Status.MERGED:
            notes = recovery.drop_task(repo, plan, store, state, tid)
            recovered += notes
            for note in notes:
                on_event(note)
    store.save(state)
    if options.agent and options.only:
        store.record(state, ev.AgentSet(options.only, options.agent), later=True)
        store.save(state)
    if options.only and options.fresh:
        only = plan.find_task(options.only)
        if only is not None and reconcile.reopen_changed(store, state, only):
            store.save(state)
    if options.only and options.review and state.tasks[options.only].status == Status.MERGED:
        why = "a review of its pull request asked for changes: running it again"
        store.record(state, ev.Reopened(options.only, why), later=True)
        store.save(state)
    return recovered


def _dispatch(
    ctx: RunContext,
    recorded: Recorded,
    options: RunOptions,
    integration: str,
    config: VerifyConfig | None,
    around: Around,
) -> Gate | None:
    """Run the dispatch loop to its end, with the verification checkouts made
    meanwhile and, when work lands through the gate, the gate's thread."""
    mode, on_event, remote = gate_mode(ctx.plan, config), around.on_event, around.remote
    prewarm = Prewarm(ctx.repo, ctx.plan.name, config)
    if options.verify and integration:
        # From the start: slots are made one or two at a time, so a core is
        # free for the verification's checkouts, which then only move at the end.
        prewarm.start(integration)
    from forge.run.dispatch.loop import Dispatcher

    gate = None
    if mode != "off" and config is not None:
        from forge.run.gate.landing import Gate

        gate = Gate(
            ctx,
            config,
            mode=mode,
            on_event=on_event,
            before_verify=prewarm.join,
        )
        gate.start()
    try:
        with remote(ctx.plan) if remote else contextlib.nullcontext() as where:
            Dispatcher(ctx, recorded, options, on_event, gate=gate, remote=where).loop()
    finally:
        if gate is not None:
            gate.close()
        ctx.slots.wait()
    prewarm.join()
    if gate is not None and gate.error is not None:
        raise gate.error
    return gate


def _conclude(
    ctx: RunContext,
    report: RunReport,
    options: RunOptions,
    *,
    gate: Gate | None,
    on_event: Callable[[str], None],
) -> None:
    """After the dispatch: the verdict. Through the gate it is the last landed
    batch's (no second verification of a head just judged); otherwise the
    integration head is verified now, unless stopped or paused."""
    repo, stop = ctx.repo, ctx.stop
    state = report.state
    report.paused = state.paused
    report.integration_head = repo.ref_value(state.integration)
    report.gate_runs = None if gate is None else gate.runs
    report.gate_subset_runs = None if gate is None else gate.subset_runs
    if stop.is_set():
        report.interrupted = True
    elif gate is not None and gate.broken is not None:
        report.verification = gate.broken
    elif options.verify and report.integration_head and not state.paused and _landed_any(state):
        landed = state.verification
        if gate is not None and landed and landed.commit == report.integration_head:
            report.verification = landed
        else:
            report.verification = _verify(ctx, report.integration_head, on_event)
            ctx.record(ev.VerificationRecorded(report.verification), later=True)
        if stop.is_set():
            report.interrupted = True


def _landed_any(state: RunState) -> bool:
    """Whether any task's work is on the integration branch: a head no task changed
    is the plan's base, and a verdict on it would blame the base for the tasks."""
    return any(ts.status == Status.MERGED for ts in state.tasks.values())


def _close_state(
    repo: Repository,
    state: RunState,
    store: StateStore,
    started: float,
    before: Snapshot,
    kept: gitfiles.Kept,
) -> None:
    """Written even when the run crashed: a crashed run has a wall time too."""
    # Slot sizes are measured here so `forge status` stays fast, beside the snapshot;
    # each slot's own `.git` is brought up to date for whoever looks into it after.
    slots = list(state.slots.values())
    undone = _put_back(repo, store, kept)
    with ThreadPoolExecutor(max_workers=1) as pool:
        sizes = pool.submit(_close_slots, repo, [Path(slot.path) for slot in slots])
        after = snapshot.take(repo)
        for slot in slots:
            store.record(
                state, ev.SlotMeasured(slot.name, sizes.result()[Path(slot.path)]), later=True
            )
    # `forge accept --now` moved the user's branch during the run: forge did that.
    before = accepted.replay(repo, store.plan, before)
    store.record(state, ev.Touched((*undone, *after.changes_since(before))), later=True)
    store.record(state, ev.RunFinished(now_iso(), round(time.monotonic() - started, 3)), later=True)
    store.save(state)


def _put_back(repo: Repository, store: StateStore, kept: gitfiles.Kept) -> list[str]:
    """What of the user's git files changed during the run and was put back (a
    change no attempt's end caught: a lane's, the gate's); one that could not be is
    left for the fingerprint to name, and `forge accept` refuses while it stands."""
    try:
        undone = gitfiles.repair(repo, kept)
    except (OSError, ForgeError) as exc:
        return [f"{gitfiles.CHANGED}: could not put them back ({exc})"]
    gitfiles.forget_run(repo.state.plan_dir(store.plan))
    return [f"{gitfiles.PUT_BACK}: " + ", ".join(undone)] if undone else []


def _close_slots(repo: Repository, paths: list[Path]) -> dict[Path, int]:
    """The slots' sizes (one `du`), once each one's `.git` says what forge's git dir
    says."""
    for path in paths:
        worktrees.settle(repo, path)
    return worktrees.disk_usages(paths)


def _forget_lost_merges(store: StateStore, state: RunState) -> None:
    """The integration branch was deleted (by hand, or `git branch -D`) after tasks
    had merged into it: their work is no longer there, so they run again rather than
    count as merged into a branch that does not hold them."""
    for ts in state.tasks.values():
        if ts.status == Status.MERGED:
            why = messages.INTEGRATION_DELETED
            store.record(state, ev.Reopened(ts.id, why), later=True)


class Prewarm:
    """Makes the plan's verification checkouts while tasks still run: a new checkout
    costs ~1 s on a large repository, and would otherwise be paid after the last
    merge, when everyone waits for the verdict."""

    def __init__(self, repo: Repository, key: str, config: VerifyConfig | None) -> None:
        self.repo = repo
        self.key = key  # the plan's name: the key its verifications run under
        self.config = config
        self.thread: threading.Thread | None = None
        self.started = False

    def start(self, commit: str) -> None:
        if self.started:
            return
        config = self.config
        lanes = [lane for lane, _ in (config.lanes if config else ())]
        self.started = True  # once: never start again
        if not lanes or config is None:
            return
        from forge.verify import checkout, pool

        def work() -> None:
            # Best effort: the verification makes what is missing anyway. The member
            # of the verification pool made ready is the one the gate's first
            # verification takes (the most recently used free one).
            with (
                contextlib.suppress(Exception),
                checkout.key_lock(self.repo, self.key),
                pool.checkouts_for(self.repo, self.key, config) as place,
            ):
                for lane in lanes:
                    if not checkout.checkout_path(self.repo, place, lane).exists():
                        checkout.prepare(self.repo, key=place, lane=lane, commit=commit)

        self.thread = threading.Thread(target=work, name="prewarm", daemon=True)
        self.thread.start()

    def join(self) -> None:
        # (also from the gate's thread, before its first verification)
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()


def _verify(ctx: RunContext, head: str, on_event: Callable[[str], None]) -> VerifyRecord:
    """The integration head verified, under the forge.toml read at the run's start."""
    from forge.verify import engine as verify

    return verify.verify_commit(
        ctx.repo,
        head,
        ctx.plan.verify_under(ctx.repo_config),
        key=ctx.plan.name,
        stop=ctx.stop,
        ask=verify.Ask(on_event=on_event, sandbox=ctx.sandbox),
    )


def exit_code(state: RunState, report: RunReport, *, only: str | None) -> ExitCode:
    if report.interrupted:
        return ExitCode.INTERRUPTED
    if state.paused:
        return ExitCode.PAUSED
    tasks = [state.tasks[only]] if only else list(state.tasks.values())
    if any(t.suggestion and t.status != Status.MERGED for t in tasks):
        return ExitCode.SPLIT
    if any(t.status != Status.MERGED for t in tasks):
        return ExitCode.FAILED
    verdict = report.verification.verdict if report.verification else None
    if verdict == Verdict.FAIL:
        return ExitCode.FAILED
    if verdict == Verdict.INTERRUPTED:
        return ExitCode.INTERRUPTED
    return ExitCode.OK


def check_retry(
    repo: Repository,
    plan: Plan,
    task: str,
    *,
    agent: str | None,
    fresh: bool = False,
    review: bool = False,
) -> None:
    """Refuse, changing nothing, a retry that cannot run: an unknown or merged task,
    a dependency that has not merged, an agent spec that does not resolve."""
    t = plan.task(task)
    state = StateStore(repo.state, plan.name).load_existing()
    ts = state.tasks.get(task) if state else None
    if ts is not None and ts.status == Status.MERGED and not review:
        from forge.run.state.reconcile import changed_since_merge

        if not changed_since_merge(ts, t):
            raise ForgeError(f"task '{task}' has already merged; nothing to retry")
        if not fresh:
            raise ForgeError(
                f"task '{task}' has merged, and its definition changed since: "
                f"`forge retry {task} --plan {plan.name} --fresh` runs it again on the current "
                "integration head"
            )
    if ts is not None and ts.status == Status.QUEUED:
        raise ForgeError(
            f"task '{task}' is queued for verification; `forge run {plan.name}` verifies and lands it"
        )
    for dep in t.deps:
        dst = state.tasks.get(dep) if state else None
        if dst is None or dst.status != Status.MERGED:
            status = dst.status if dst else Status.PENDING
            raise ForgeError(
                f"task '{task}' depends on '{dep}', which has not merged ({status}); "
                f"retry '{dep}' first"
            )
    if review and t.run is not None:
        raise ForgeError(f"task '{task}' is a shell task (`run`): no agent reads a review")
    if agent is not None:
        if t.run is not None:
            raise ForgeError(f"task '{task}' is a shell task (`run`): it takes no agent")
        from forge.agents import spec as agents

        agents.resolve(agent, agent_defs(repo, plan))
