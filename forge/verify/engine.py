"""The verification engine: lanes in parallel, flake reruns, fingerprints, verdicts.

One verification judges exactly one commit, in checkouts of forge's own (see
forge/verify/checkout.py). Each lane's command runs in a process group of its own with
its own time limit and log, in a checkout that holds exactly the commit plus what the
plan's setup made (forge/verify/hermetic.py); a failing run names the failing tests its
log shows (forge/verify/failures.py). A lane that fails with its checkout unchanged is
rerun up to `reruns` times, until one fails as the run before it (confirmed, as the
gate does); a later pass makes it FLAKY. A run that changed the checkout is FAIL
whatever its exit code, is never rerun, and is restored before anything else runs. A stop (the `stop` event: SIGINT/SIGTERM, or a newer verification
superseding this one) stops every lane's group and makes the lanes INTERRUPTED;
nothing stopped is rerun, and a stop before a run starts runs nothing.

The verdict is the worst lane's: FAIL, then INTERRUPTED, FLAKY, PASS. PASS and FLAKY are
remembered per (tree, config fingerprint) and answered from the cache; so is a confirmed
FAIL, for those who ask for it (`forge verify`, the hooks: not the gate, which judges a
person's retry again).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from forge.base import logs as logfiles
from forge.base import proc, procgroup
from forge.base.sandbox import Sandbox
from forge.base.text import one_line
from forge.frozen import frozen
from forge.git.contained import ceiling_env
from forge.git.repo import Repository, short_sha
from forge.plan.repo_config import VerifyConfig
from forge.verify import environment, pool, quarantine, reports, testdb
from forge.verify import records as verify_records
from forge.verify.checkout import Checkout, check_key, checkout_path, key_lock, prepare
from forge.verify.failures import Failure, failures_from_log
from forge.verify.flakes import Once, Reruns
from forge.verify.records import LaneResult, LaneRun, Verdict, VerifyRecord, worst

__all__ = [
    "LaneResult",
    "LaneRun",
    "Verdict",
    "VerifyRecord",
    "cached_verdict",
    "describe_failure",
    "lane_tag",
    "latest_record",
    "verify_commit",
]

Emit = Callable[[str], None]


def cached_verdict(repo: Repository, tree: str, config: VerifyConfig) -> VerifyRecord | None:
    return verify_records.cached(repo.state, tree, config.fingerprint())


def latest_record(repo: Repository, key: str) -> VerifyRecord | None:
    return verify_records.latest(repo.state, key)


def lane_tag(repo: Repository, key: str, lane: str) -> str:
    """The FORGE_PROC_TAG of a lane's processes: finds them even after a crash."""
    return f"forge-verify:{repo.common_dir}:{key}:{lane}"


def _new_id(commit: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{commit[:8]}-{os.urandom(3).hex()}"


@frozen
class Ask:
    """How a verification is asked for (verify_commit).

    `force`: run even when a verdict of the same tree and config is remembered.
    `on_event`: told each step, a line each. `sandbox`: lanes under bubblewrap.
    `reruns` decides whether a failing lane runs again (default: up to the config's
    `reruns` times, until one fails as the one before it). `remember=False` (a run of some tests only) neither enters the
    verdict cache nor becomes the key's latest. `remembered_fail`: a confirmed FAIL
    of the same tree and config answers too (a person's `forge verify`, the hooks),
    not only a PASS or FLAKY. `on_stage` hears what a lane starts, in a few words
    (`setup of lane unit`, `lane unit run 2 of at most 3`), for a view of what runs now.
    """

    force: bool = False
    on_event: Emit | None = None
    sandbox: bool = False
    reruns: Reruns | None = None
    remember: bool = True
    remembered_fail: bool = False
    on_stage: Emit | None = None


def verify_commit(
    repo: Repository,
    rev: str,
    config: VerifyConfig | None,
    *,
    key: str,
    stop: threading.Event | None = None,
    ask: Ask = Ask(),
) -> VerifyRecord:
    """Verify the commit `rev` names, as `ask` says; the record is stored before
    it is returned.

    `key` names the verification (a plan name, `cli`, `hook`): one verification
    per key at a time (Busy otherwise), in a member of the verification pool
    (forge/verify/pool.py) shared by every key with the same setup and env.
    """
    force = ask.force
    remember, remembered_fail = ask.remember, ask.remembered_fail
    emit: Emit = ask.on_event or (lambda _msg: None)
    check_key(key)
    commit = repo.rev_parse(rev)
    tree = repo.tree_of(commit)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    base = VerifyRecord(
        id=_new_id(commit),
        key=key,
        commit=commit,
        tree=tree,
        config_hash="",
        verdict=Verdict.UNVERIFIED,
        lanes=(),
        started=started,
        duration=0.0,
    )
    if config is None or not config.lanes:
        emit("no verification configured: UNVERIFIED")
        verify_records.save(repo.state, base)
        return base
    base = replace(base, config_hash=config.fingerprint())
    if not force:
        found = verify_records.lookup(repo.state, tree, config.fingerprint())
        if found.ignored:
            emit(
                f"a remembered verdict of tree {short_sha(tree)} was ignored ({found.ignored}): verifying"
            )
        hit = found.record
        if hit is None and remembered_fail:
            hit = verify_records.lookup(repo.state, tree, config.fingerprint(), failed=True).record
        if hit is not None:
            record = replace(hit, key=key, commit=commit)
            emit(
                f"tree {short_sha(tree)} was verified before ({record.verdict}): remembered verdict"
            )
            verify_records.save(repo.state, record)
            return record
    stop = stop or threading.Event()
    t0 = time.monotonic()
    if stop.is_set():
        record = _interrupted_before_start(base, config)
    else:
        procgroup.become_subreaper()  # orphaned grandchildren of lanes come back to be reaped
        with key_lock(repo, key), pool.checkouts_for(repo, key, config) as place:
            lanes = _run_lanes(repo, base, config, place, stop, ask)
        record = replace(
            base,
            lanes=lanes,
            verdict=worst([lane.verdict for lane in lanes]),
            duration=round(time.monotonic() - t0, 3),
        )
    verify_records.save(repo.state, record, remember=remember)
    emit(f"verification {record.verdict} ({short_sha(record.commit)})")
    return record


def _interrupted_before_start(base: VerifyRecord, config: VerifyConfig) -> VerifyRecord:
    lanes = tuple(LaneResult(n, c, Verdict.INTERRUPTED, ()) for n, c in config.lanes)
    return replace(base, lanes=lanes, verdict=Verdict.INTERRUPTED)


def _say_lane(emit: Emit, lane: str, msg: str) -> None:
    emit(f"lane {lane}: {msg}")


def _run_lanes(
    repo: Repository,
    base: VerifyRecord,
    config: VerifyConfig,
    place: str,
    stop: threading.Event,
    ask: Ask,
) -> tuple[LaneResult, ...]:
    """The lanes run in the checkouts of `place` (the member of the verification
    pool, forge/verify/pool.py, held for this verification)."""
    emit: Emit = ask.on_event or (lambda _msg: None)
    policy, sandbox, stage = ask.reruns or Once(config.reruns), ask.sandbox, ask.on_stage
    # One after another: concurrent `git worktree add` calls contend for git's files.
    checkouts: dict[str, Checkout] = {}
    setup = environment.setup_hash(config.setup, config.env) if config.setup else None
    results: dict[str, LaneResult] = {}
    for name, cmd in config.lanes:
        if stop.is_set():
            break
        try:
            checkouts[name] = prepare(
                repo,
                key=place,
                lane=name,
                commit=base.commit,
                setup=setup,
                say=functools.partial(_say_lane, emit, name),
            )
        except proc.CommandError as exc:
            # git cannot make the commit's files (a required filter that fails on
            # them, a path this file system refuses): the commit's failure, blamed
            # like any other, never the run's.
            results[name] = _unmade(repo, base, (place, name), cmd, exc)
            emit(f"lane {name}: {results[name].verdict} ({results[name].reason})")
    errors: list[BaseException] = []

    def lane_main(name: str, command: str) -> None:
        try:
            co = checkouts.get(name)
            if name in results:
                return
            if co is None:
                results[name] = LaneResult(name, command, Verdict.INTERRUPTED, ())
            else:
                # The reports forge asks for are written beside the lane's logs: in the
                # sandbox that folder must exist to be writable (and goes when empty).
                made = reports.reports_dir(verify_records.logs_dir(repo.state, base.id) / "x")
                box = _lane_box(repo, co, name in config.networked, made) if sandbox else None
                lane = _Lane(repo, base, config, co, name, stop, emit, box, policy, stage)
                results[name] = _run_lane(lane, command)
                with contextlib.suppress(OSError):
                    made.rmdir()
        except BaseException as exc:  # noqa: BLE001 re-raised by the caller's thread after the join
            errors.append(exc)
            results[name] = LaneResult(name, command, Verdict.FAIL, ())

    threads = [
        threading.Thread(target=lane_main, args=lane, name=f"verify-{lane[0]}", daemon=True)
        for lane in config.lanes
    ]
    for t in threads:
        t.start()
    for t in threads:
        # A timed join keeps the main thread responsive to SIGINT/SIGTERM handlers.
        while t.is_alive():
            t.join(0.1)
    if errors:
        raise errors[0]
    return tuple(results[name] for name, _cmd in config.lanes)


def _lane_box(repo: Repository, co: Checkout, network: bool, reports: Path) -> Sandbox:
    """A lane writes only its checkout and the folder of the reports forge asked for:
    no agent folder, no network unless the lane says `network = true` (its setup
    keeps it: see _Lane.run)."""
    reports.mkdir(parents=True, exist_ok=True)  # (a folder bound must exist)
    return Sandbox((co.path, reports), (repo.root, repo.common_dir), agents=False, network=network)


def _unmade(
    repo: Repository,
    base: VerifyRecord,
    where: tuple[str, str],
    command: str,
    exc: proc.CommandError,
) -> LaneResult:
    """A lane whose checkout of the commit could not be made: FAIL, git's own words
    in its log and its reason; the half-made checkout (`where`: its checkout key
    and lane) is made again next time."""
    place, name = where
    log = verify_records.logs_dir(repo.state, base.id) / f"{name}-checkout.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {' '.join(exc.argv)}\n{exc.output}", errors="backslashreplace")
    path = checkout_path(repo, place, name)
    shutil.rmtree(path, ignore_errors=True)
    said = one_line(proc.tail(exc.output, 1)) or f"git exited {exc.returncode}"
    run = LaneRun(
        kind="checkout",
        exit_code=exc.returncode,
        duration=0.0,
        changed=(),
        log=str(log),
        failures=(Failure(name, "", said),),
    )
    return LaneResult(name, command, Verdict.FAIL, (run,))


@frozen
class _Lane:
    """One lane of one verification: where its commands run and how."""

    repo: Repository
    base: VerifyRecord
    config: VerifyConfig
    co: Checkout
    name: str
    stop: threading.Event
    emit: Emit
    box: Sandbox | None
    policy: Reruns  # whether a failed run is run again
    stage: Emit | None = None  # hears what the lane starts (verify_commit's on_stage)

    def run(
        self, kind: str, command: str, *, log: Path, timeout: float | None, n: int = 0
    ) -> LaneRun:
        """Run `command` in the lane's checkout, in a process group of its own; a
        checkout the command changed is restored (the run records what changed), and
        a failing run names the failing tests its report (else its log) shows. Each
        test's outcome goes into the history (run `n` of the lane; 0: setup)."""
        co = self.co
        env = environment.expand(self.config.env, co.path)
        report = reports.Report.of(self.config, self.name, command, co.path, log) if n else None
        if report is not None:
            env = report.env(env)
            report.clear()
        before = co.fingerprint()
        co.begin_run()
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
                sandbox=replace(self.box, network=True)
                if self.box and kind == "setup"
                else self.box,
            ),
            stop=self.stop,
        )
        if res.left:
            self.emit(f"lane {self.name}: left processes running, stopped: {', '.join(res.left)}")
        tests = report.read() if report is not None else None
        changed = co.fingerprint().changes_since(before)
        if changed:
            co.restore(self.base.commit)
        co.end_run()
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
        )
        if report is not None and not (res.stopped or changed):
            where = testdb.RunOf(
                self.base.id, self.base.key, self.name, self.base.tree, n, kind, str(log)
            )
            testdb.record(self.repo.state, where, reports.outcomes(tests, failures))
            none = "" if res.timed_out else report.ran_none(tests, log, res.returncode)
            if none and report.allow_empty:
                run = replace(run, allowed_empty=True, failures=())
            elif none:
                run = replace(run, empty=none, failures=())
        return run


def _run_lane(lane: _Lane, command: str) -> LaneResult:
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
            # What the failed run left must not decide the rerun (it set no index
            # flag: that would have changed its checkout, and it would not be rerun).
            co.restore(lane.base.commit, unflag=False)
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
        passed = run.exit_code == 0 or run.allowed_empty or (run.quarantined and not run.failures)
        if passed and not run.timed_out:
            verdict = Verdict.PASS if n == 1 else Verdict.FLAKY
            break
        why = run.outcome + "".join(f": {f.describe()}" for f in run.failures[:1])
        emit(f"lane {name}: run {n} failed ({why})")
        verdict = Verdict.FAIL
        if not lane.policy.again(name, runs):
            break
    result = LaneResult(name, command, verdict, tuple(runs))
    emit(f"lane {name}: {verdict} ({result.reason})")
    return result


def _forgiven(lane: _Lane, run: LaneRun) -> LaneRun:
    """A failed run's quarantined failing tests, set apart: listed as quarantined,
    no longer among its failures. When every failing test (all named) was
    quarantined, the run counts as a pass."""
    if run.exit_code == 0 or run.timed_out:
        return run
    failing = {f.test for f in run.failures if f.test}
    if not failing:
        return run
    held = quarantine.quarantined(lane.repo, lane.config, lane.name, failing)
    if not held:
        return run
    named = tuple(sorted(held))
    rest = tuple(f for f in run.failures if f.test not in held)
    if not rest:
        lane.emit(f"lane {lane.name}: only quarantined tests failed ({', '.join(named[:5])})")
    return replace(run, quarantined=named, failures=rest)


def _setup(lane: _Lane) -> LaneRun | None:
    """Run the plan's setup in the lane's checkout unless it ran there with the same
    setup and env. Its failure (None: it succeeded or was not needed) as a run."""
    config, co = lane.config, lane.co
    if not config.setup:
        return None
    digest = environment.setup_hash(config.setup, config.env)
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


_LOG_READ = 4 << 20  # runners print their failures at the end of a long log


def _failures(lane: str, log: Path) -> tuple[Failure, ...]:
    """The failing tests a run's log names."""
    return tuple(failures_from_log(lane, logfiles.tail(log, _LOG_READ)))


def describe_failure(record: VerifyRecord) -> str:
    """One line: which lanes failed and where their last log is."""
    bad = [lane for lane in record.lanes if lane.verdict == Verdict.FAIL]
    if not bad:
        return f"verification {record.verdict}"
    parts = [
        f"{lane.name}: {lane.reason}" + (f", log {lane.runs[-1].log}" if lane.runs else "")
        for lane in bad
    ]
    return f"verification FAIL on {short_sha(record.commit)}: " + "; ".join(parts)
