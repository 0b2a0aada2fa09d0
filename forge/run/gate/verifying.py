"""The gate's verifications of candidate commits: its own (a batch's candidates and
a bisection's prefixes) and the speculations on the batches after the running one
(forge/run/gate/speculation.py).

A commit is judged by the first that knows: a FAIL this run judged on the same
tree (FAIL is not in the verdict cache), a speculation that verified that tree,
then a verification of its own. Each verification that ran is counted and kept in
the state's `gate_steps`, and what runs now is told to `forge status`
(forge/run/gate/doing.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from forge.plan.repo_config import VerifyConfig
from forge.run.context import RunContext
from forge.run.gate import fanout, story, unblame
from forge.run.gate.chains import Chains
from forge.run.gate.doing import Doing
from forge.run.gate.speculation import Speculator
from forge.run.gate.subsets import SubsetFirst
from forge.run.state.gate_story import StepKind as Kind
from forge.verify import engine as verify
from forge.verify.junit import runner_of
from forge.verify.records import Verdict, VerifyRecord

Tests = Mapping[str, frozenset[str]]  # lane -> test ids
Forgive = frozenset[tuple[str, frozenset[str]]]


def _frozen(tests: Tests) -> Forgive:
    return frozenset((lane, ids) for lane, ids in tests.items() if ids)


class Verifier:
    """Judges commits for the gate, on the caller's thread or several at once."""

    def __init__(
        self,
        ctx: RunContext,
        config: VerifyConfig,
        chains: Chains,
        *,
        width: int,
        on_event: Callable[[str], None],
        before_verify: Callable[[], None],
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.chains = chains
        self.on_event = on_event
        self.before_verify = before_verify
        self.doing = Doing(ctx)  # what the gate runs now, for status and the live view
        # "the whole suite" only where a lane runs tests (a lint or build lane is no suite)
        suite = any(runner_of(command) for _name, command in config.lanes)
        self._whole = "running the whole suite" if suite else "running the verification"
        self.runs = 0  # verifications that ran (not answered by the verdict cache)
        self.reruns: SubsetFirst | None = None  # the running batch's rerun rule
        # the tests the running batch forgives beside the quarantined ones (those the
        # head fails on its own), left out of its whole runs
        self.forgive: Tests = {}
        self._failed: dict[tuple[str, Forgive], VerifyRecord] = {}  # FAILs judged this run
        self._runs_lock = threading.Lock()
        # `verify_parallel`: the batches after the running one, judged at once
        self.spec = Speculator(
            width=width,
            key=ctx.plan.name,
            stop=ctx.stop,
            build=chains.build,
            verify=lambda commit, key, stop: self.verify(commit, key, stop, Kind.SPECULATION),
            tree_of=ctx.repo.tree_of,
        )

    def judge(
        self,
        commit: str,
        key: str | None = None,
        forgive: Tests | None = None,
        *,
        again: bool = False,
        kind: Kind = Kind.BATCH,
    ) -> VerifyRecord:
        """A whole run of every lane on `commit`, `forgive`n tests left out (default:
        the running batch's); `again`: run it even when this run judged the tree FAIL
        (a whole run repeated, to tell a flake or an order-dependent test)."""
        tree = self.ctx.repo.tree_of(commit)
        forgive = self.forgive if forgive is None else forgive
        known = (tree, _frozen(forgive))
        failed = None if again else self._failed.get(known)
        if failed is not None and unblame.excused(self.ctx.repo, self.config, failed):
            del self._failed[known]  # its failing tests proved flaky since: judged again
            failed = None
        if failed is not None:  # FAIL is not in the verdict cache; this run remembers it
            return replace(failed, commit=commit, cached=True)
        record = self.spec.answer(tree) if forgive == self.forgive else None
        if record is not None:
            record = replace(record, commit=commit)
        else:
            key = key or self.ctx.plan.name
            record = self.verify(commit, key, self.ctx.stop, kind, forgive=forgive)
        if record.verdict == Verdict.FAIL:
            self._failed[known] = record
        return record

    def judge_many(self, commits: Sequence[str]) -> list[VerifyRecord]:
        """Bisection steps judged at once, each in checkouts of its own."""
        name = self.ctx.plan.name
        keys = [name] + [f"{name}.bisect{i}" for i in range(1, len(commits))]
        return fanout.at_once(self.judge, commits, keys)

    def verify(
        self,
        commit: str,
        key: str,
        stop: threading.Event,
        kind: Kind,
        *,
        forgive: Tests | None = None,
    ) -> VerifyRecord:
        """One verification in the checkouts of `key` (the plan's, or a speculation's)."""
        forgive = self.forgive if forgive is None else forgive
        why = "already failing on the head"
        self.before_verify()
        where = "" if key == self.ctx.plan.name else f" [{key.rsplit('.', 1)[-1]}]"
        if not where:
            self.doing.now(f"{self._whole} on {commit[:12]}")
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
                reruns=self.reruns,
                on_stage=None if where else self.doing.stage,
                forgive={lane: dict.fromkeys(ids, why) for lane, ids in forgive.items()},
                candidate=True,
            ),
        )
        if not record.cached:
            with self._runs_lock:
                self.runs += 1
            self.keep(kind, started, record)
        return record

    def keep(self, kind: Kind, started: float, record: VerifyRecord, name: str = "") -> None:
        """Keep one verification the gate ran (`name`: a run of some tests only)."""
        with self.ctx.store.lock:
            tasks = self.chains.tasks_of.get(record.commit, ())
            story.keep_step(self.ctx, kind, started, record, name=name, tasks=tasks)
