"""One lane of one verification, run: its setup, its runs and reruns, each in a
process group of its own in the lane's checkout, and what each run tells (the
failing tests, forge's test report, the tests the run left out). See
forge/verify/engine.py for the verification around it.

A run passes only when its command exits 0: no report's list of failures and no
forgiven test turns a failing exit into a pass. The forgiven tests (quarantined;
those the gate forgives, failing on the integration head) are left out of the run
by their exact ids where the lane can (forge's pytest plugin); where it cannot,
their failures are set apart but the exit stands, and the failure says why.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from forge.base import logs as logfiles
from forge.base import procgroup
from forge.base.sandbox import SETUP_CACHE, Sandbox
from forge.frozen import frozen
from forge.git.contained import ceiling_env
from forge.git.repo import Repository
from forge.layers.view import View
from forge.plan.repo_config import VerifyConfig
from forge.verify import environment, offline, quarantine, reports, testdb
from forge.verify import records as verify_records
from forge.verify.checkout import Checkout
from forge.verify.failures import Failure, failures_from_log
from forge.verify.flakes import Reruns
from forge.verify.records import LaneResult, LaneRun, Verdict, VerifyRecord

Emit = Callable[[str], None]


def lane_tag(repo: Repository, key: str, lane: str) -> str:
    """The FORGE_PROC_TAG of a lane's processes: finds them even after a crash."""
    return f"forge-verify:{repo.common_dir}:{key}:{lane}"


@frozen
class Lane:
    """One lane of one verification: where its commands run and how."""

    repo: Repository
    base: VerifyRecord
    config: VerifyConfig
    co: Checkout | View
    name: str
    stop: threading.Event
    emit: Emit
    box: Sandbox | None
    policy: Reruns  # whether a failed run is run again
    stage: Emit | None = None  # hears what the lane starts (verify_commit's on_stage)
    forgiven: Mapping[str, str] | None = None  # test -> why: left out where the lane can
    candidate: bool = False  # the commit is a candidate not yet landed (Ask.candidate)

    def run(
        self, kind: str, command: str, *, log: Path, timeout: float | None, n: int = 0
    ) -> LaneRun:
        """Run `command` in the lane's checkout, in a process group of its own; a
        checkout the command changed is restored (the run records what changed), and
        a failing run names the failing tests its report (else its log) shows. Each
        test's outcome goes into the history (run `n` of the lane; 0: setup)."""
        co = self.co
        env = environment.expand(self.config.env, co.path)
        deselect = sorted(self.forgiven or {})
        report = (
            reports.Report.of(self.config, self.name, command, co.path, deselect) if n else None
        )
        with reports.channel_for(report) as channel:
            if report is not None:
                env = report.env(env, channel)
                report.clear()
            begun = co.begin()
            if report is not None and report.inside and report.path and begun.upper:
                # a report the run writes in a view is read from its upper layer
                seen = begun.upper / report.path.relative_to(co.path)
                report = replace(report, path=seen)
            res = procgroup.run_group(
                procgroup.GroupSpec(
                    command,
                    cwd=co.path,
                    log_path=log,
                    env={**self.repo.settings.child_env(), **ceiling_env(co.path), **env},
                    timeout=timeout,
                    grace=self.config.grace,
                    tag=lane_tag(self.repo, self.base.key, self.name),
                    # Setup installs what the lane needs: it keeps the network.
                    sandbox=replace(
                        self.box, network=True, cache=self.repo.state.root / SETUP_CACHE
                    )
                    if self.box and kind == "setup"
                    else self.box,
                    pass_fds=() if channel is None else (channel.fd,),
                    enter=begun.enter,
                    hide=(self.repo.state.private_dir,),
                ),
                stop=self.stop,
            )
            if res.left:
                self.emit(
                    f"lane {self.name}: left processes running, stopped: {', '.join(res.left)}"
                )
            got = channel.read() if channel is not None else None
            problem = channel.problem if channel is not None else ""
            tests = report.read() if report is not None else None  # (removed when inside)
        if got is not None:
            problem = reports.disagreement(got, logfiles.tail(log, _LOG_READ), res.returncode)
            tests = None if problem else got.tests
        if problem:
            problem = f"its test report was not believed: {problem}"
            self.emit(f"lane {self.name}: {problem}")
        changed = co.finish(begun, self.base.commit)
        failed = res.returncode != 0 and not (res.timed_out or res.stopped)
        failures = _failures(self.name, log) if failed and kind != "setup" else ()
        if failed and tests is not None:
            failures = reports.failures_of(self.name, tests, failures)
        run = LaneRun(
            kind=kind,
            exit_code=res.returncode,
            duration=round(res.duration, 3),
            changed=tuple(changed),
            log=str(log),
            timed_out=res.timed_out,
            stopped=res.stopped,
            timeout=timeout,
            failures=failures,
            tests=None if tests is None else sum(t.outcome != "skipped" for t in tests),
            deselected=got.deselected if got is not None and not problem else (),
            report_problem=problem,
        )
        if report is not None and not (res.stopped or changed):
            # (a run of chosen tests is filed as `subset`: flakiness is learned from
            # runs of one kind)
            filed = "subset" if self.forgiven is None else kind
            where = testdb.RunOf(
                self.base.id, self.base.key, self.name, self.base.tree, n, filed, str(log)
            )
            outcomes = reports.outcomes(tests, failures)
            testdb.record(self.repo.state, where, outcomes, candidate=self.candidate)
            none = "" if res.timed_out else report.ran_none(tests, log, res.returncode)
            if none and report.allow_empty:
                run = replace(run, allowed_empty=True, failures=())
            elif none:
                run = replace(run, empty=none, failures=())
        return run


def run_lane(lane: Lane, command: str) -> LaneResult:
    name, emit, co = lane.name, lane.emit, lane.co
    runs: list[LaneRun] = []
    verdict = Verdict.INTERRUPTED
    logs = verify_records.logs_dir(lane.repo.state, lane.base.id)
    failed_setup = _setup(lane)
    if failed_setup is not None:
        verdict = Verdict.INTERRUPTED if failed_setup.stopped else Verdict.FAIL
        result = LaneResult(name, command, verdict, (failed_setup,))
        emit(f"lane {name}: {verdict} ({result.reason})")
        return result
    for n in itertools.count(1):
        if lane.stop.is_set():
            verdict = Verdict.INTERRUPTED
            break
        kind = "initial" if n == 1 else "rerun"
        if n > 1:
            co.again(lane.base.commit)  # (a layered checkout: a fresh upper layer)
            failed_setup = _setup(lane)  # setup's products as setup left them
            if failed_setup is not None:
                runs.append(failed_setup)
                verdict = Verdict.INTERRUPTED if failed_setup.stopped else Verdict.FAIL
                break
        log = logs / f"{name}-{n}.log"
        emit(f"lane {name}: {kind} run {n} started (log {log})")
        if lane.stage is not None:
            most = lane.config.reruns + 1
            lane.stage(f"lane {name} run {n}" + (f" of at most {most}" if most > 1 else ""))
        run = lane.run(kind, command, log=log, timeout=lane.config.timeout, n=n)
        if run.stopped:
            runs.append(run)
            verdict = Verdict.INTERRUPTED
            break
        if run.changed:
            runs.append(run)
            emit(f"lane {name}: the run changed the checkout: {', '.join(run.changed[:8])}")
            verdict = Verdict.FAIL
            break
        run = _forgiven(lane, run)
        runs.append(run)
        if run.empty:
            verdict = Verdict.EMPTY
            break
        # What lands passed a whole run that exited 0: no report's list of failures, and
        # no forgiven test, turns a failing exit into a pass.
        passed = run.exit_code == 0 or run.allowed_empty
        if passed and not run.timed_out:
            verdict = Verdict.PASS if n == 1 else Verdict.FLAKY
            break
        why = run.outcome + "".join(f": {f.describe()}" for f in run.failures[:1])
        emit(f"lane {name}: run {n} failed ({why})")
        verdict = Verdict.FAIL
        if not lane.policy.again(name, runs):
            break
    forgiven = tuple(sorted((lane.forgiven or {}).items()))
    result = LaneResult(name, command, verdict, tuple(runs), forgiven=forgiven)
    emit(f"lane {name}: {verdict} ({result.reason})")
    offline.say(result, emit, cut_off=lane.box is not None and not lane.box.network)
    return result


def _forgiven(lane: Lane, run: LaneRun) -> LaneRun:
    """A failed run's forgiven failing tests (quarantined, or already failing on the
    integration head), set apart: listed as quarantined, no longer among its
    failures. They still never make its exit a pass: when nothing else failed, the
    failure says the lane could not leave them out."""
    if run.exit_code == 0 or run.timed_out or lane.forgiven is None:
        return run
    failing = {f.test for f in run.failures if f.test}
    if not failing:
        return run
    forgiven = lane.forgiven
    held = {t for t in failing if t in forgiven}
    held |= quarantine.quarantined(lane.repo, lane.config, lane.name, failing - held)
    if not held:
        return run
    named = tuple(sorted(held))
    rest = tuple(f for f in run.failures if f.test not in held)
    if rest:
        return replace(run, quarantined=named, failures=rest)
    why = (
        f"exit {run.exit_code} not explained: this lane cannot leave out tests, and only "
        f"forgiven ones failed ({', '.join(named[:3])}{' ...' if len(named) > 3 else ''})"
    )
    lane.emit(f"lane {lane.name}: {why}")
    return replace(run, quarantined=named, unexplained=why, failures=())


def _setup(lane: Lane) -> LaneRun | None:
    """Run the plan's setup in the lane's checkout unless it ran there with the same
    setup and env. Its failure (None: it succeeded or was not needed) as a run."""
    config, co = lane.config, lane.co
    if not config.setup:
        return None
    if isinstance(co, View):
        return _setup_layer(lane, co, config.setup)
    digest = environment.setup_hash(config.setup, config.env)
    co.drop_bytecode()
    if (
        environment.is_set_up(co.path, digest)
        and co.products() is not None
        and co.products_intact()
    ):
        return None
    # Setup runs on the bare commit, so what is untracked after it is what it made.
    co.scrub(keep=[])
    log = verify_records.logs_dir(lane.repo.state, lane.base.id) / f"{lane.name}-setup.log"
    lane.emit(f"lane {lane.name}: setup in its checkout (log {log})")
    if lane.stage is not None:
        lane.stage(f"setup of lane {lane.name}")
    # What setup makes (an environment, build output) must be ignored by git: the
    # checkout is compared before and after each lane run and restored.
    run = lane.run("setup", config.setup, log=log, timeout=config.setup_timeout)
    if run.exit_code == 0 and not (run.timed_out or run.stopped or run.changed):
        co.record_products()
        environment.mark_set_up(co.path, digest)
        return None
    return run


def _setup_layer(lane: Lane, co: View, setup: str) -> LaneRun | None:
    """Make the view's setup layer unless it is there: setup runs once over the base
    layer, at the view's own path, and what it adds becomes a read-only layer (a
    setup that writes or deletes a tracked path fails, naming them)."""
    if co.ready():
        return None
    made = co.for_setup()
    log = verify_records.logs_dir(lane.repo.state, lane.base.id) / f"{lane.name}-setup.log"
    lane.emit(f"lane {lane.name}: setup, making its layer (log {log})")
    if lane.stage is not None:
        lane.stage(f"setup of lane {lane.name}")
    run = replace(lane, co=made).run("setup", setup, log=log, timeout=lane.config.setup_timeout)
    if run.exit_code == 0 and not (run.timed_out or run.stopped or run.changed):
        co.adopt(made)
        return None
    co.discard(made)
    return run


_LOG_READ = 4 << 20  # runners print their failures at the end of a long log


def _failures(lane: str, log: Path) -> tuple[Failure, ...]:
    """The failing tests a run's log names."""
    return tuple(failures_from_log(lane, logfiles.tail(log, _LOG_READ)))
