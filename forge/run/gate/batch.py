"""One batch of the gate judged: its candidate chain built on the integration head,
verified, and a failure bisected (forge/run/gate/bisection.py decides, by the
failing tests where it can: forge/run/gate/by_tests.py). The batch's record in the
run state follows it: the chain once built, then the phase and the bisection's
steps left. What the batch comes to is written by forge/run/gate/verdicts.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from forge.base import faults
from forge.plan.repo_config import VerifyConfig
from forge.run.context import RunContext
from forge.run.gate import bisection as gate
from forge.run.gate import story
from forge.run.gate.by_tests import ByTests
from forge.run.gate.chains import Chains
from forge.run.gate.queue import GateQueue
from forge.run.gate.subsets import GateProbe, SubsetFirst
from forge.run.gate.verifying import Verifier
from forge.run.state import events as ev
from forge.run.state.gate_record import GatePhase
from forge.run.state.gate_story import StepKind as Kind
from forge.verify import flakes
from forge.verify.quarantine import tests_known_flaky


class Batches:
    """Verifies the gate's batches and bisects their failures."""

    def __init__(
        self,
        ctx: RunContext,
        config: VerifyConfig,
        *,
        queue: GateQueue,
        chains: Chains,
        verifier: Verifier,
        on_event: Callable[[str], None],
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.queue = queue
        self.chains = chains
        self.verifier = verifier
        self.on_event = on_event
        self.parallel = ctx.plan.verify_parallel  # bisection judges this many prefixes at once
        # `gate_on = "regressions"`: a failure the integration head has too blames nobody
        self.regressions = (ctx.plan.gate_on or config.gate_on or "regressions") == "regressions"
        self._probes: list[GateProbe] = []  # each batch's, counting its runs of some tests

    @property
    def subset_runs(self) -> int:
        """Runs of some tests only (forge/run/gate/by_tests.py), the culprits'
        confirming reruns and the runs after a landing included."""
        return sum(p.runs for p in self._probes)

    def run(self, batch: list[str], head: str) -> tuple[gate.Outcome, GateProbe]:
        """The outcome of `batch` on `head`, and the probe that ran its tests (it
        checks a culprit's failing tests once more)."""
        ctx, verifier = self.ctx, self.verifier
        verifier.doing.batch()
        confirm = flakes.Confirm(
            self.config.reruns,
            flakes.failing_tests,
            lambda test: not flakes.exists_at(ctx.repo, head, test),
            was_flaky=lambda lane, tests: bool(tests & tests_known_flaky(ctx.repo, lane)),
        )
        verifier.reruns = SubsetFirst(self.config, confirm)
        red = story.known_red(ctx.state)
        verifier.forgive = red if self.regressions else {}  # left out of its whole runs
        probe = GateProbe(
            ctx.repo,
            self.config,
            key=ctx.plan.name,
            stop=ctx.stop,
            sandbox=ctx.sandbox,
            judge=verifier.judge,
            on_event=self.on_event,
            on_step=lambda name, at, record: verifier.keep(Kind.SUBSET, at, record, name),
            on_doing=verifier.doing.now,
            on_stage=verifier.doing.stage,
        )
        self._probes.append(probe)
        self.on_event(f"gate: verifying {', '.join(batch)}")
        judges = gate.Judges(
            verifier.judge,
            many=verifier.judge_many if self.parallel > 1 else None,
            width=self.parallel,
            tests=ByTests(probe, self.regressions, confirm=self.config.reruns > 0, red=red),
        )
        out = gate.run_batch(
            batch,
            head=head,
            build=lambda tasks: self._build(head, tasks),
            judges=judges,
            progress=self._progress,
        )
        return out, probe

    def _build(self, head: str, tasks: Sequence[str]) -> gate.Chain:
        ctx = self.ctx
        chain = self.chains.build(head, tasks)
        with ctx.store.lock:
            assert ctx.state.gate is not None
            chained = [[s.task, s.commit] for s in chain.steps]
            ctx.record(ev.GateRecorded(replace(ctx.state.gate, chain=chained)))
        if chain.steps:
            self.queue.built(chain.steps[-1].commit)
        return chain

    def _progress(self, phase: str, search: gate.Bisection | None) -> None:
        ctx = self.ctx
        left = 0 if search is None else search.rounds(self.parallel)
        with ctx.store.lock:
            assert ctx.state.gate is not None
            gate_left = None if search is None else left
            gate_phase = GatePhase(phase)
            ctx.record(ev.GateRecorded(replace(ctx.state.gate, phase=gate_phase, left=gate_left)))
        if GatePhase(phase) == GatePhase.VERIFYING:
            faults.point("gate-candidate-built")
        else:
            self.verifier.doing.bisecting(left)
            self.queue.tip_failed()  # built on a candidate that failed: thrown away
        if left:
            self.on_event(f"gate: bisecting, at most {left} verification(s) left")
            faults.point("gate-bisect")
