"""The gate at work: a thread that verifies the queued tasks in batches and lands what
passed on the integration branch. Its parts, each with what it keeps:

- queue.py: the tasks waiting, and the thread that takes them a batch at a time;
- chains.py: the candidate chains, built with plumbing (no ref moves);
- verifying.py: the verifications, the run's own and the speculations';
- batch.py: one batch verified, and a failure bisected (bisection.py decides);
- verdicts.py: what a batch came to, written down (the landing, the culprit, ...),
  with the story (story.py).

A batch's record in the run state begins before it is built and is cleared once
everything it came to is written."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from forge.plan.repo_config import VerifyConfig
from forge.run.context import RunContext
from forge.run.gate import bisection as gate
from forge.run.gate import unblame
from forge.run.gate.batch import Batches
from forge.run.gate.chains import Chains
from forge.run.gate.queue import GateQueue
from forge.run.gate.verdicts import Verdicts
from forge.run.gate.verifying import Verifier
from forge.run.state import events as ev
from forge.run.state.gate_record import GateRecord
from forge.run.state.run_state import Status
from forge.verify.records import VerifyRecord


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
        self.wake: Callable[[], None] = lambda: None
        # Tasks left QUEUED by an earlier run come first, in plan order (with those a
        # flaky test blamed, given back).
        unblame.clear(ctx.repo, ctx.state, config, partial(ctx.record, later=True), logs=ctx.logs)
        queued = [tid for tid, ts in ctx.state.tasks.items() if ts.status == Status.QUEUED]
        self.chains = Chains(ctx)
        width = ctx.plan.verify_parallel if mode == "queue" else 1
        self.verifier = Verifier(
            ctx, config, self.chains, width=width, on_event=on_event, before_verify=before_verify
        )
        self.queue = GateQueue(ctx, queued, mode=mode, spec=self.verifier.spec, halted=self._halted)
        self.batches = Batches(
            ctx,
            config,
            queue=self.queue,
            chains=self.chains,
            verifier=self.verifier,
            on_event=on_event,
        )
        self.verdicts = Verdicts(ctx, config, self.chains, self.queue.window, on_event=on_event)

    @property
    def error(self) -> BaseException | None:
        """What ended the gate's thread, raised by the runner after the dispatch."""
        return self.queue.error

    @property
    def broken(self) -> VerifyRecord | None:
        """The head fails on its own (or a lane ran no test): nothing more lands."""
        return self.verdicts.broken

    @property
    def runs(self) -> int:
        """Verifications that ran (not answered by the verdict cache)."""
        return self.verifier.runs

    @property
    def subset_runs(self) -> int:
        """Runs of some tests only (forge/run/gate/by_tests.py)."""
        return self.batches.subset_runs

    # -- the dispatcher's side ---------------------------------------------------

    def start(self) -> None:
        self.verdicts.begin()
        self.queue.start(self._run, lambda: self.wake())

    def submit(self, task: str) -> None:
        self.queue.submit(task)

    def release(self, flag: bool) -> None:
        self.queue.release(flag)

    def idle(self) -> bool:
        """Nothing being verified, and nothing queued that will be."""
        return self.queue.idle()

    def close(self) -> None:
        self.queue.close()

    # -- the gate's thread -------------------------------------------------------

    def _halted(self) -> bool:
        return self.broken is not None or self.ctx.stop.is_set()

    def _run(self, batch: list[str]) -> None:
        """One batch: verified (and bisected), what it came to written, the tasks to
        verify again put back first."""
        ctx = self.ctx
        head = ctx.repo.ref_value(ctx.state.integration)
        assert head is not None
        ctx.record(ev.GateRecorded(GateRecord(batch=list(batch), head=head)))
        out, probe = self.batches.run(batch, head)
        requeue = self.verdicts.settle(batch, out, head, probe)
        with ctx.store.lock:
            requeue += unblame.clear(
                ctx.repo, ctx.state, self.config, partial(ctx.record, later=True), logs=ctx.logs
            )
        self.queue.put_back(requeue)
        ctx.record(ev.GateRecorded(None))
