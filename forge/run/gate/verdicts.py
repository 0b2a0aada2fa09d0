"""What the gate writes for the tasks of a batch once it is judged: those it lands,
the culprit it blames, those whose work does not merge onto the chain (CONFLICT, or
refused), those whose work is on the head already (MERGED as they are), and why
nothing landed (the head fails on its own, or a lane ran no test); with the batch's
story (forge/run/gate/story.py).

The integration branch moves only here (with the gate on), only to a candidate
that passed (PASS, FLAKY, or failures the head has too), with the expected old
value. A landing is written down before the ref moves and its result after: a run
killed in between is recognised by the next one (state/recovery.py), so nothing
lands twice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from forge.base import faults
from forge.git.merge import conflict_reason
from forge.plan.repo_config import VerifyConfig
from forge.run.attempt import phases
from forge.run.context import RunContext
from forge.run.gate import bisection as gate
from forge.run.gate import by_tests, harness, story, unblame
from forge.run.gate.chains import Chains
from forge.run.gate.subsets import GateProbe
from forge.run.records import history
from forge.run.state import events as ev
from forge.run.state.gate_record import Landing
from forge.run.state.records import MERGED, FeedbackSource, VerifiedBy
from forge.run.state.run_state import Status
from forge.verify import engine as verify
from forge.verify import testdb
from forge.verify.records import Verdict, VerifyRecord

STEPS_KEPT = 500  # the gate's verifications the run state keeps, across runs


class Verdicts:
    """Writes what each batch came to, and keeps why the gate can go no further."""

    def __init__(
        self,
        ctx: RunContext,
        config: VerifyConfig,
        chains: Chains,
        window: gate.Window,
        *,
        on_event: Callable[[str], None],
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.chains = chains
        self.window = window  # the batch size, after a pass or a culprit
        self.on_event = on_event
        self.broken: VerifyRecord | None = None  # the head fails on its own
        self._first_step = 0  # this run's first entry of the state's gate_steps

    def begin(self) -> None:
        """The run's first batch is to come."""
        with self.ctx.store.lock:
            # Every run's verifications stay, for the report (the oldest go past
            # STEPS_KEPT); this run's begin here.
            steps = self.ctx.state.gate_steps
            del steps[: max(0, len(steps) - STEPS_KEPT)]
            self._first_step = len(steps)

    def settle(self, batch: list[str], out: gate.Outcome, head: str, probe: GateProbe) -> list[str]:
        """Write what `batch` on `head` came to; the tasks that go to the gate again."""
        ctx = self.ctx
        requeue = list(out.requeue)
        conflicts(ctx, out.chain, self.chains.conflict_by, self.on_event)
        already(ctx, out.chain, head)
        with ctx.store.lock:  # the batch's story, when it landed nothing (or named a culprit)
            tasks_of = self.chains.tasks_of
            story.tell(ctx, batch, out, since=self._first_step, tasks_of=tasks_of)
        if out.interrupted or ctx.stop.is_set():
            # Nothing of the batch lands: its tasks stay QUEUED for the next run.
            requeue = [s.task for s in out.chain.steps]
        elif out.empty is not None:
            requeue = [s.task for s in out.chain.steps]
            self._empty(story.as_record(out.empty))
        elif out.broken_head is not None:
            self._broken(story.as_record(out.broken_head), head)
            requeue = [s.task for s in out.chain.steps]
        else:
            if out.landed:
                self._land(out, head, probe)
            if out.culprit is not None:
                self._culprit(out, probe, requeue)
            (self.window.failed if out.culprit else self.window.passed)()
        return requeue

    def _broken(self, record: VerifyRecord, head: str) -> None:
        self.broken = record
        self.ctx.record(ev.VerificationRecorded(record), later=True)  # the head's own verdict
        self.on_event(
            f"gate: the integration head {head[:12]} fails verification on its own "
            f"({verify.describe_failure(record)}): nothing lands"
        )

    def _empty(self, record: VerifyRecord) -> None:
        """A lane that runs tests ran none: nothing lands, nobody is blamed, the run
        pauses (exit 8) naming the lane."""
        why = story.empty_reason(record)
        self.broken = record
        self.ctx.record(ev.Paused(why), ev.VerificationRecorded(record), later=True)
        self.on_event(f"gate: {why}: nothing lands, nobody is blamed")

    def _culprit(self, out: gate.Outcome, probe: GateProbe, requeue: list[str]) -> None:
        """Blame the culprit for its own failures only: the tests that fail on its tree
        and not on its parent (never one the head fails already, a quarantined test or
        a flake just excused), confirmed once more on its tree. When they pass there
        now (flaky on evidence) or are quarantined by now, it is queued again."""
        assert out.culprit is not None
        record = story.as_record(out.culprit_record)
        own = out.culprit_tests or probe.failing(record) or {}
        if not out.culprit_tests:
            # Found by whole runs (a lane that names no test or cannot run some alone,
            # or failures the tests could not settle): whole runs are its evidence, a
            # run of its tests alone would be another kind.
            self._blame(out.culprit.task, record)
            return
        if out.order_dependent:
            # They pass alone by definition: two whole runs of the chain failed them and
            # a whole run of the culprit's parent passed them.
            self._blame(out.culprit.task, story.only(record, own), order_dependent=True)
            return
        again = probe.recheck(out.culprit.commit, own) if own else None
        failed = (probe.failing(again) or {}) if again and again.verdict == Verdict.FAIL else {}
        if again is not None and not failed:
            requeue.insert(0, out.culprit.task)  # every one of them passed now: flaky
            return
        blamed = story.only(again, failed) if again is not None else story.only(record, own)
        if unblame.excused(self.ctx.repo, self.config, blamed):
            requeue.insert(0, out.culprit.task)
        else:
            self._blame(out.culprit.task, blamed)

    def _land(self, out: gate.Outcome, head: str, probe: GateProbe) -> None:
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
            ctx.record(ev.GateRecorded(replace(ctx.state.gate, landing=landing)))
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
        # The tests its whole run left out run on the landed tree: what the head still
        # fails, and passes toward a quarantined test's release (never the verdict).
        still = probe.after_landing(tip, record)
        red = by_tests.union(story.known_red(ctx.state), out.pre_existing)
        pre_existing = {lane: ids & red.get(lane, frozenset()) for lane, ids in still.items()}
        harnesses = _harness_changes(ctx, out, head)
        with ctx.store.lock:
            said: list[ev.Event] = []
            for step in out.landed:
                definition = ctx.plan.task(step.task).definition()
                if step.task in harnesses:
                    said.append(ev.Warned(step.task, harnesses[step.task]))
                said.append(ev.Merged(step.task, step.commit, definition, covered, phases.now()))
            said.append(ev.VerificationRecorded(verification))
            assert ctx.state.gate is not None
            said.append(ev.GateRecorded(replace(ctx.state.gate, landing=None)))
            fixed, known = story.landed(ctx.state, names, tip, pre_existing, flaky=out.flaky)
            said += known
            ctx.store.record(ctx.state, *said)
        history.settle(ctx, names)
        for tid in names:
            ctx.on_change(tid)
        summary = covered.summary or verification.verdict
        self.on_event(f"gate: landed {', '.join(names)} ({summary}, {tip[:12]})")
        for line in story.known_lines(pre_existing, fixed, names):
            self.on_event(f"gate: {line}")
        for tid, note in harnesses.items():
            self.on_event(f"gate: {tid} {note}")

    def _blame(self, tid: str, record: VerifyRecord, *, order_dependent: bool = False) -> None:
        ctx = self.ctx
        reason, log, lane = story.blame_reason(record, order_dependent=order_dependent)
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
                at=phases.now(),
            )
            # Tests named: evidence that they are flaky may come before the run ends.
            doubt = [ev.BlameDoubted(tid)] if any(f.test for f in record.failures) else []
            ctx.record(failed, *doubt)
        history.settle(ctx, [tid])
        if last.candidate is None:  # (a candidate's is told by forge/run/candidates.py,
            said = "blamed, waiting for evidence" if doubt else "FAILED"  # which may land
            self.on_event(f"{tid}: {said} ({reason})")  # another)


def _harness_changes(ctx: RunContext, out: gate.Outcome, head: str) -> dict[str, str]:
    """task -> `changes its test harness: conftest.py`, for each landed task that does."""
    notes = {}
    before = head
    for step in out.landed:
        paths = harness.changed(ctx.repo, before, step.commit)
        if paths:
            notes[step.task] = f"changes its test harness: {', '.join(paths[:5])}"
        before = step.commit
    return notes


def conflicts(
    ctx: RunContext,
    chain: gate.Chain,
    conflict_by: dict[str, list[str]],
    on_event: Callable[[str], None],
) -> None:
    """Each task of `chain` that conflicts (with the tasks `conflict_by` names) or
    was refused: CONFLICT, its paths in its attempt's merge.log."""
    found = {tid: ("conflicting paths", paths) for tid, paths in chain.conflicts.items()}
    found |= {tid: ("", (why,)) for tid, why in chain.refused.items()}
    for tid, (what, paths) in found.items():
        ts = ctx.state.tasks[tid]
        last = ts.last
        assert last is not None
        log = ctx.logs / tid / f"attempt-{last.number}" / "merge.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"{what or 'not merged'}:\n" + "\n".join(paths) + "\n")
        with ctx.store.lock:
            # (refused: the one line says why)
            why = conflict_reason(paths, conflict_by.pop(tid, ())) if what else paths[0]
            failed = ev.Failed(tid, Status.CONFLICT, why, str(log), MERGED, at=phases.now())
            ctx.record(failed)
        history.settle(ctx, [tid])
        on_event(f"{tid}: CONFLICT ({ts.reason})")


def already(ctx: RunContext, chain: gate.Chain, head: str) -> None:
    """Each task of `chain` whose work is on `head` already: MERGED there."""
    for tid in chain.already:
        with ctx.store.lock:
            ctx.record(ev.Merged(tid, head, ctx.plan.task(tid).definition(), at=phases.now()))
        history.settle(ctx, [tid])
