"""The gate at work: a thread that verifies the queued tasks in batches and lands what
passed on the integration branch. bisection.py decides, story.py keeps what it did;
this module builds the candidate chains with plumbing, runs the verifications and
writes the state. The integration branch moves only here (with the gate on), only to
a candidate that passed (PASS, FLAKY, or failures the head has too), with the expected
old value. A landing is written down before the ref moves and its result after: a run
killed in between is recognised by the next one (state/recovery.py), so nothing lands
twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from forge.base import faults
from forge.base.text import one_line
from forge.errors import ForgeError
from forge.git.merge import (
    MergeResult,
    is_ancestor,
    landed_tasks,
    merge_onto,
)
from forge.git.trailers import merge_message
from forge.plan.repo_config import VerifyConfig
from forge.run.attempt import phases
from forge.run.context import RunContext
from forge.run.gate import bisection as gate
from forge.run.gate import fanout, story, unblame, verdicts
from forge.run.gate.by_tests import ByTests
from forge.run.gate.doing import Doing
from forge.run.gate.speculation import Speculator
from forge.run.gate.subsets import GateProbe, SubsetFirst
from forge.run.records import history
from forge.run.state import events as ev
from forge.run.state.gate_record import GatePhase, GateRecord, Landing
from forge.run.state.gate_story import StepKind as Kind
from forge.run.state.records import FeedbackSource, VerifiedBy
from forge.run.state.run_state import Status
from forge.verify import engine as verify
from forge.verify import flakes, testdb
from forge.verify.quarantine import tests_known_flaky
from forge.verify.records import Verdict, VerifyRecord

STEPS_KEPT = 500  # the gate's verifications the run state keeps, across runs


class Gate:
    """Verifies queued tasks in batches on a thread of its own; the dispatcher feeds
    it (`submit`) and is woken (`wake`) whenever a batch ends."""

    def __init__(
        self,
        ctx: RunContext,
        config: VerifyConfig,
        *,
        mode: gate.Mode,
        on_event: Callable[[str], None],
        before_verify: Callable[[], None] = lambda: None,
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.mode = mode
        plan, parallel = ctx.plan, ctx.plan.verify_parallel
        # halves after a culprit, one more after a pass (`batch_window = "adaptive"`)
        self.window = gate.Window(plan.batch_max, fixed=plan.batch_window != "adaptive")
        self.parallel = parallel  # bisection judges up to this many prefixes at once
        self.on_event = on_event
        self.before_verify = before_verify
        self.wake: Callable[[], None] = lambda: None
        self.doing = Doing(ctx)  # what the gate runs now, for status and the live view
        # Tasks left QUEUED by an earlier run come first, in plan order (with those a
        # flaky test blamed, given back).
        unblame.clear(ctx.repo, ctx.state, config, ctx.apply)
        self.queue = [tid for tid, ts in ctx.state.tasks.items() if ts.status == Status.QUEUED]
        self.error: BaseException | None = None
        self.broken: VerifyRecord | None = None  # the head fails on its own
        self.runs = 0  # verifications that ran (not answered by the verdict cache)
        self.subset_runs = 0  # runs of some tests only (forge/run/gate/by_tests.py)
        # `gate_on = "regressions"`: a failure the integration head has too blames nobody
        self.regressions = (ctx.plan.gate_on or config.gate_on or "regressions") == "regressions"
        self._failed: dict[str, VerifyRecord] = {}  # tree -> FAIL, judged in this run
        self._cond = threading.Condition()
        self._busy = False
        self._released = False  # `end`: nothing else can start until something lands
        self._closed = False
        self._first_step = 0  # this run's first entry of the state's gate_steps
        self._thread: threading.Thread | None = None
        self._runs_lock = threading.Lock()
        self._tip: str | None = None  # the running batch's candidate tip
        self._tasks_of: dict[str, tuple[str, ...]] = {}  # candidate commit -> its tasks
        self._conflict_by: dict[str, list[str]] = {}  # task -> the tasks it conflicts with
        self._reruns: SubsetFirst | None = None  # the running batch's rerun rule
        # `verify_parallel`: the batches after the running one, judged at once
        self.spec = Speculator(
            width=parallel if mode == "queue" else 1,
            key=ctx.plan.name,
            stop=ctx.stop,
            build=self._chain,
            verify=lambda commit, key, stop: self._verify(commit, key, stop, Kind.SPECULATION),
            tree_of=ctx.repo.tree_of,
        )

    # -- the dispatcher's side ---------------------------------------------------

    def start(self) -> None:
        with self.ctx.store.lock:
            # Every run's verifications stay, for the report (the oldest go past
            # STEPS_KEPT); this run's begin here.
            steps = self.ctx.state.gate_steps
            del steps[: max(0, len(steps) - STEPS_KEPT)]
            self._first_step = len(steps)
        self._thread = threading.Thread(target=self._loop, name="gate", daemon=True)
        self._thread.start()

    def submit(self, task: str) -> None:
        with self._cond:
            self.queue.append(task)
            self._cond.notify_all()
            # Under the lock: the tip is still the running batch's, not a stale one.
            if self._tip is not None:
                self.spec.top_up(self._tip, self.queue, self.window.size)

    def release(self, flag: bool) -> None:
        with self._cond:
            if flag != self._released:
                self._released = flag
                self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing being verified, and nothing queued that will be."""
        with self._cond:
            if self._busy:
                return False
            return not self.queue or self._stuck()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            while self._thread.is_alive():
                self._thread.join(0.1)  # a timed join stays responsive to signals

    # -- the gate's thread -------------------------------------------------------

    def _stuck(self) -> bool:
        return self.error is not None or self.broken is not None or self.ctx.stop.is_set()

    def _ready(self) -> bool:
        return bool(self.queue) and (self.mode != "end" or self._released)

    def _loop(self) -> None:
        try:
            self._serve()
        finally:
            self.spec.close()

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not (self._closed or self._stuck() or self._ready()):
                    self._cond.wait(0.2)
                if self._closed or self._stuck():
                    return
                head = self.ctx.repo.ref_value(self.ctx.state.integration)
                batch = self.spec.take(head or "", self.queue) or gate.take_batch(
                    self.queue, mode=self.mode, batch_max=self.window.size
                )
                del self.queue[: len(batch)]
                self._busy = True
            try:
                self._run(batch)
            except BaseException as exc:  # noqa: BLE001 - reported by the runner, after the dispatch
                self.error = exc
                with self._cond:
                    self.queue[:0] = batch
            finally:
                with self._cond:
                    self._busy, self._tip = False, None
                self.wake()

    def _run(self, batch: list[str]) -> None:
        ctx = self.ctx
        head = ctx.repo.ref_value(ctx.state.integration)
        assert head is not None
        ctx.emit(ev.GateRecorded(GateRecord(batch=list(batch), head=head)))
        self.doing.batch()
        confirm = flakes.Confirm(
            self.config.reruns,
            flakes.failing_tests,
            lambda test: not flakes.exists_at(ctx.repo, head, test),
            was_flaky=lambda lane, tests: bool(tests & tests_known_flaky(ctx.repo, lane)),
        )
        self._reruns = SubsetFirst(self.config, confirm)
        probe = GateProbe(
            ctx.repo,
            self.config,
            key=ctx.plan.name,
            stop=ctx.stop,
            sandbox=ctx.sandbox,
            judge=self._judge,
            on_event=self.on_event,
            on_step=lambda name, at, record: self._step(Kind.SUBSET, at, record, name),
            on_doing=self.doing.now,
            on_stage=self.doing.stage,
        )
        self.on_event(f"gate: verifying {', '.join(batch)}")
        try:
            judges = gate.Judges(
                self._judge,
                many=self._judge_many if self.parallel > 1 else None,
                width=self.parallel,
                tests=ByTests(
                    probe,
                    self.regressions,
                    confirm=self.config.reruns > 0,
                    red=story.known_red(ctx.state),
                ),
            )
            out = gate.run_batch(
                batch,
                head=head,
                build=lambda tasks: self._build(head, tasks),
                judges=judges,
                progress=self._progress,
            )
        finally:
            self.subset_runs += probe.runs
        requeue = list(out.requeue)
        verdicts.conflicts(ctx, out.chain, self._conflict_by, self.on_event)
        verdicts.already(ctx, out.chain, head)
        self._tell(batch, out)
        if out.interrupted or ctx.stop.is_set():
            # Nothing of the batch lands: its tasks stay QUEUED for the next run.
            requeue = [s.task for s in out.chain.steps]
        elif out.empty is not None:
            requeue = [s.task for s in out.chain.steps]
            self._empty(story.as_record(out.empty))
        elif out.broken_head is not None:
            self.broken = story.as_record(out.broken_head)
            ctx.apply(ev.VerificationRecorded(self.broken))  # the head's own verdict
            requeue = [s.task for s in out.chain.steps]
            self.on_event(
                f"gate: the integration head {head[:12]} fails verification on its own "
                f"({verify.describe_failure(self.broken)}): nothing lands"
            )
        else:
            if out.landed:
                self._land(out, head)
            if out.culprit is not None:
                self._culprit(out.culprit.task, out.culprit.commit, out, probe, requeue)
            (self.window.failed if out.culprit else self.window.passed)()
        with ctx.store.lock:
            requeue += unblame.clear(ctx.repo, ctx.state, self.config, ctx.apply)
        with self._cond:
            self.queue[:0] = requeue
        ctx.emit(ev.GateRecorded(None))

    def _culprit(
        self, tid: str, commit: str, out: gate.Outcome, probe: GateProbe, requeue: list[str]
    ) -> None:
        """Blame the culprit, unless its failing tests prove flaky run once more on its
        tree (before anyone is blamed) or are quarantined by now: then it is queued."""
        record = story.as_record(out.culprit_record)
        failing = probe.failing(record) or {}
        flaked = probe.recheck(commit, record)
        if (failing and flaked == failing) or unblame.excused(self.ctx.repo, self.config, record):
            requeue.insert(0, tid)
        else:
            self._blame(tid, record)

    def _build(self, head: str, tasks: Sequence[str]) -> gate.Chain:
        ctx = self.ctx
        chain = self._chain(head, tasks)
        with ctx.store.lock:
            assert ctx.state.gate is not None
            chained = [[s.task, s.commit] for s in chain.steps]
            ctx.emit(ev.GateRecorded(replace(ctx.state.gate, chain=chained)))
        if chain.steps:
            with self._cond:
                self._tip = chain.steps[-1].commit
                self.spec.top_up(self._tip, self.queue, self.window.size)
        return chain

    def _chain(self, head: str, tasks: Sequence[str]) -> gate.Chain:
        """The candidate chain of `tasks` on `head` (plumbing only, no ref moves)."""
        ctx = self.ctx
        tip = head
        steps: list[gate.Step] = []
        conflicts: dict[str, tuple[str, ...]] = {}
        already: list[str] = []
        refused: dict[str, str] = {}
        for tid in tasks:
            ts = ctx.state.tasks[tid]
            last = ts.last
            assert last is not None and last.commit is not None
            title = ctx.plan.task(tid).title
            message = merge_message(ctx.plan.name, tid, last.number, title)
            try:
                res = merge_onto(ctx.repo, tip, last.commit, message=message)
            except ForgeError as exc:  # a commit the chain cannot be built from
                res = MergeResult(merged=False, refused=one_line(str(exc))[:200])
            if res.refused:
                refused[tid] = res.refused
            elif not res.merged:
                conflicts[tid] = res.conflicts
                if ts.base is not None:  # who changed those paths since its base
                    since = f"{ts.base}..{tip}"
                    by = landed_tasks(ctx.repo, since, res.conflicts, plan=ctx.plan.name)
                    self._conflict_by[tid] = by
            elif res.already or res.commit is None:
                if is_ancestor(ctx.repo, last.commit, head):
                    already.append(tid)  # landed before a crash the recovery did not see
            else:
                tip = res.commit
                steps.append(gate.Step(tid, tip))
                self._tasks_of[tip] = tuple(s.task for s in steps)
        return gate.Chain(tuple(steps), conflicts, tuple(already), refused)

    def _judge_many(self, commits: Sequence[str]) -> list[VerifyRecord]:
        """Bisection steps judged at once, each in checkouts of its own."""
        name = self.ctx.plan.name
        keys = [name] + [f"{name}.bisect{i}" for i in range(1, len(commits))]
        return fanout.at_once(self._judge, commits, keys)

    def _judge(self, commit: str, key: str | None = None) -> VerifyRecord:
        tree = self.ctx.repo.tree_of(commit)
        failed = self._failed.get(tree)
        if failed is not None and unblame.excused(self.ctx.repo, self.config, failed):
            del self._failed[tree]  # its failing tests proved flaky since: judged again
            failed = None
        if failed is not None:  # FAIL is not in the verdict cache; this run remembers it
            return replace(failed, commit=commit, cached=True)
        record = self.spec.answer(tree)
        if record is not None:
            record = replace(record, commit=commit)
        else:
            record = self._verify(commit, key or self.ctx.plan.name, self.ctx.stop, Kind.BATCH)
        if record.verdict == Verdict.FAIL:
            self._failed[tree] = record
        return record

    def _verify(self, commit: str, key: str, stop: threading.Event, kind: Kind) -> VerifyRecord:
        """One verification in the checkouts of `key` (the plan's, or a speculation's)."""
        self.before_verify()
        where = "" if key == self.ctx.plan.name else f" [{key.rsplit('.', 1)[-1]}]"
        if not where:
            self.doing.now(f"running the whole suite on {commit[:12]}")
        started = time.time()
        record = verify.verify_commit(
            self.ctx.repo,
            commit,
            self.config,
            key=key,
            stop=stop,
            ask=verify.Ask(
                on_event=lambda msg: self.on_event(f"gate{where}: {msg}"),
                sandbox=self.ctx.sandbox,
                reruns=self._reruns,
                on_stage=None if where else self.doing.stage,
            ),
        )
        if not record.cached:
            with self._runs_lock:
                self.runs += 1
            self._step(kind, started, record)
        return record

    def _step(self, kind: Kind, started: float, record: VerifyRecord, name: str = "") -> None:
        """Keep one verification the gate ran (`name`: a run of some tests only)."""
        with self.ctx.store.lock:
            tasks = self._tasks_of.get(record.commit, ())
            story.keep_step(self.ctx, kind, started, record, name=name, tasks=tasks)

    def _tell(self, batch: list[str], out: gate.Outcome) -> None:
        """Keep the batch's story when it landed nothing (or named a culprit)."""
        with self.ctx.store.lock:
            story.tell(self.ctx, batch, out, since=self._first_step, tasks_of=self._tasks_of)

    def _progress(self, phase: str, search: gate.Bisection | None) -> None:
        ctx = self.ctx
        left = 0 if search is None else search.rounds(self.parallel)
        with ctx.store.lock:
            assert ctx.state.gate is not None
            gate_left = None if search is None else left
            gate_phase = GatePhase(phase)
            ctx.emit(ev.GateRecorded(replace(ctx.state.gate, phase=gate_phase, left=gate_left)))
        if GatePhase(phase) == GatePhase.VERIFYING:
            faults.point("gate-candidate-built")
        else:
            self.doing.bisecting(left)
            with self._cond:  # built on a candidate that failed: thrown away
                tip, self._tip = self._tip, None
                self.spec.discard(tip)
        if left:
            self.on_event(f"gate: bisecting, at most {left} verification(s) left")
            faults.point("gate-bisect")

    def _land(self, out: gate.Outcome, head: str) -> None:
        ctx = self.ctx
        tip = out.tip
        record = story.as_record(out.tip_record)
        assert tip is not None
        verification, covered = story.landing_verdict(record, tip, flaky=out.flaky)
        with ctx.store.lock:
            assert ctx.state.gate is not None
            landing = Landing(
                to=tip,
                tasks={s.task: s.commit for s in out.landed},
                verified_by=covered,
                verification=verification.to_dict(),
                head=head,
            )
            ctx.emit(ev.GateRecorded(replace(ctx.state.gate, landing=landing)))
        names = [s.task for s in out.landed]
        faults.point("gate-before-land")
        ctx.repo.update_ref(
            ctx.state.integration,
            tip,
            head,
            message=f"forge: land {', '.join(names)} (verification {record.verdict})",
        )
        faults.point("gate-after-land")
        testdb.landed(ctx.repo.state, ctx.repo.tree_of(tip))
        with ctx.store.lock:
            said: list[ev.Event] = []
            for step in out.landed:
                ts = ctx.state.tasks[step.task]
                definition = ctx.plan.task(step.task).definition()
                said.append(ev.Merged(step.task, step.commit, definition, covered))
                said += phases.end(step.task, ts.last)
            said.append(ev.VerificationRecorded(verification))
            assert ctx.state.gate is not None
            said.append(ev.GateRecorded(replace(ctx.state.gate, landing=None)))
            fixed, known = story.landed(ctx.state, names, tip, out.pre_existing, flaky=out.flaky)
            said += known
            ctx.store.emit(ctx.state, *said)
        history.settle(ctx, names)
        for tid in names:
            ctx.on_change(tid)
        summary = covered.summary or verification.verdict
        self.on_event(f"gate: landed {', '.join(names)} ({summary}, {tip[:12]})")
        for line in story.known_lines(out.pre_existing, fixed, names):
            self.on_event(f"gate: {line}")

    def _empty(self, record: VerifyRecord) -> None:
        """A lane that runs tests ran none: nothing lands, nobody is blamed, the run
        pauses (exit 8) naming the lane."""
        why = story.empty_reason(record)
        self.broken = record
        self.ctx.apply(ev.Paused(why), ev.VerificationRecorded(record))
        self.on_event(f"gate: {why}: nothing lands, nobody is blamed")

    def _blame(self, tid: str, record: VerifyRecord) -> None:
        ctx = self.ctx
        reason, log, lane = story.blame_reason(record)  # (the same words as the story's)
        ts = ctx.state.tasks[tid]
        last = ts.last
        assert last is not None
        with ctx.store.lock:
            failed = ev.Failed(
                tid,
                Status.FAILED,
                reason,
                log,
                FeedbackSource.verify(lane),
                failures=tuple(record.failures),
                # (for a culprit: the verification that failed it)
                verified_by=VerifiedBy(record.id, record.commit, "FAIL"),
            )
            ctx.emit(*phases.end(tid, last), failed)
        history.settle(ctx, [tid])
        if last.candidate is None:  # (a candidate's is told by forge/run/candidates.py,
            self.on_event(f"{tid}: FAILED ({reason})")  # which may land another)
