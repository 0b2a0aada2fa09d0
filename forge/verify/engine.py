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
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime

from forge.base import box, proc
from forge.base.sandbox import Sandbox
from forge.base.text import one_line
from forge.frozen import frozen
from forge.git.repo import Repository, short_sha
from forge.layers import mode as layer_mode
from forge.layers.store import store_dir
from forge.layers.view import LayerSession, View, session
from forge.plan.repo_config import VerifyConfig
from forge.verify import environment, pool, quarantine, reports
from forge.verify import records as verify_records
from forge.verify.checkout import Checkout, check_key, checkout_path, key_lock, prepare
from forge.verify.failures import Failure
from forge.verify.flakes import Once, Reruns
from forge.verify.lane import Lane, lane_tag, run_lane
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
Forgiven = Mapping[str, Mapping[str, str]]  # lane -> test id -> why it is forgiven


def cached_verdict(repo: Repository, tree: str, config: VerifyConfig) -> VerifyRecord | None:
    return verify_records.cached(repo.state, tree, config.fingerprint())


def latest_record(repo: Repository, key: str) -> VerifyRecord | None:
    return verify_records.latest(repo.state, key)


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
    `forgive`: tests forgiven beside the quarantined ones (the gate's: already failing
    on the integration head), left out of the run by their exact ids where the lane
    can; they never turn a failing exit into a pass. `candidate`: the commit is a
    candidate not yet landed (the gate's), so a test seen to pass and fail on it is
    evidence for its own verdict only, never a quarantine for the repository.
    """

    force: bool = False
    on_event: Emit | None = None
    sandbox: bool = False
    reruns: Reruns | None = None
    remember: bool = True
    remembered_fail: bool = False
    on_stage: Emit | None = None
    forgive: Forgiven | None = None
    candidate: bool = False
    chosen: bool = False  # a run of chosen tests (the gate's subsets): nothing left out


def forgiven_tests(repo: Repository, config: VerifyConfig, ask: Ask) -> dict[str, dict[str, str]]:
    """Each lane's forgiven tests now, and why: the quarantined ones and `ask`'s."""
    out: dict[str, dict[str, str]] = {}
    extra = ask.forgive or {}
    if ask.chosen:
        return out
    for name, _cmd in config.lanes:
        held = quarantine.held(repo, config, name)
        out[name] = {**held, **{t: why for t, why in extra.get(name, {}).items() if t not in held}}
    return out


def _still_forgiven(record: VerifyRecord, forgiven: Forgiven) -> bool:
    """A remembered verdict answers only while every test it left out is forgiven."""
    return all(t in forgiven.get(lane, {}) for lane, t, _why in record.deselected)


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
    it is returned. `key` names the verification (a plan name, `cli`, `hook`): one
    verification per key at a time (Busy otherwise), in a member of the verification
    pool (forge/verify/pool.py) shared by every key with the same setup and env."""
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
    config = replace(config, sandboxed=ask.sandbox)  # the mode is part of the verdict's key
    base = replace(base, config_hash=config.fingerprint())
    forgiven = forgiven_tests(repo, config, ask)
    if not force:
        found = verify_records.lookup(repo.state, tree, config.fingerprint())
        if found.ignored:
            emit(
                f"a remembered verdict of tree {short_sha(tree)} was ignored ({found.ignored}): verifying"
            )
        hit = found.record
        if hit is not None and not _still_forgiven(hit, forgiven):
            emit(f"a remembered verdict of tree {short_sha(tree)} left out tests forgiven no more")
            hit = None
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
        box.become_subreaper()  # orphaned grandchildren of lanes come back to be reaped
        with key_lock(repo, key), _places(repo, key, config, ask) as place:
            lanes = _run_lanes(repo, base, config, place, stop, replace(ask, forgive=forgiven))
        record = replace(
            base,
            lanes=lanes,
            verdict=worst([lane.verdict for lane in lanes]),
            duration=round(time.monotonic() - t0, 3),
        )
    verify_records.save(repo.state, record, remember=remember)
    emit(f"verification {record.verdict} ({short_sha(record.commit)})")
    return record


_said: set[str] = set()  # the fallback is said once per run (process)


@contextlib.contextmanager
def _places(
    repo: Repository, key: str, config: VerifyConfig, ask: Ask
) -> Iterator[str | LayerSession]:
    """Where the lanes run: a session of layers (forge/layers/), else a member of
    the pool of checkouts (forge/verify/pool.py), held for this verification."""
    mode = layer_mode.choose(store_dir(repo))
    if mode.layers:
        with session(repo, mode, candidate=ask.candidate) as layered:
            yield layered
        return
    if mode.probed and mode.why not in _said:
        _said.add(mode.why)
        (ask.on_event or (lambda _msg: None))(mode.line())
    with pool.checkouts_for(repo, key, config) as member:
        yield member


def _interrupted_before_start(base: VerifyRecord, config: VerifyConfig) -> VerifyRecord:
    lanes = tuple(LaneResult(n, c, Verdict.INTERRUPTED, ()) for n, c in config.lanes)
    return replace(base, lanes=lanes, verdict=Verdict.INTERRUPTED)


def _say_lane(emit: Emit, lane: str, msg: str) -> None:
    emit(f"lane {lane}: {msg}")


def _run_lanes(
    repo: Repository,
    base: VerifyRecord,
    config: VerifyConfig,
    place: str | LayerSession,
    stop: threading.Event,
    ask: Ask,
) -> tuple[LaneResult, ...]:
    """The lanes run in the checkouts of `place` (the member of the verification
    pool, forge/verify/pool.py, held for this verification; or layered views)."""
    emit: Emit = ask.on_event or (lambda _msg: None)
    policy, sandbox, stage = ask.reruns or Once(config.reruns), ask.sandbox, ask.on_stage
    # One after another: concurrent `git worktree add` calls contend for git's files.
    checkouts: dict[str, Checkout | View] = {}
    results: dict[str, LaneResult] = {}
    for name, cmd in config.lanes:
        if stop.is_set():
            break
        try:
            checkouts[name] = _prepare(repo, base, config, place, name, emit)
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
                box = _lane_box(repo, co, name in config.networked, config) if sandbox else None
                lane = Lane(repo, base, config, co, name, stop, emit, box, policy, stage)
                forgiven = None if ask.chosen else dict((ask.forgive or {}).get(name, {}))
                lane = replace(lane, forgiven=forgiven, candidate=ask.candidate)
                results[name] = run_lane(lane, command)
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


def _prepare(
    repo: Repository,
    base: VerifyRecord,
    config: VerifyConfig,
    place: str | LayerSession,
    name: str,
    emit: Emit,
) -> Checkout | View:
    """The lane's checkout of the commit: its layered view, or its checkout in the
    pool's member, moved to the commit."""
    if isinstance(place, LayerSession):
        made = (config.setup, config.env, ()) if config.setup else None
        return place.view(name, base.commit, made)
    return prepare(
        repo,
        key=place,
        lane=name,
        commit=base.commit,
        setup=environment.setup_hash(config.setup, config.env) if config.setup else None,
        say=functools.partial(_say_lane, emit, name),
    )


def _lane_box(
    repo: Repository, co: Checkout | View, network: bool, config: VerifyConfig
) -> Sandbox:
    """A lane writes only its checkout (forge's test report goes to a file descriptor
    it inherits): no agent folder, no network unless the lane says `network = true`
    (its setup keeps it: see forge/verify/lane.py), and then the plan's `host_ports`.
    forge's pytest plugin is read where forge is installed, which the sandbox's
    private /tmp may cover."""
    readable = (repo.root, repo.common_dir, reports.PLUGIN_DIR)
    return Sandbox(
        (co.path,), readable, agents=False, network=network, host_ports=config.host_ports
    )


def _unmade(
    repo: Repository,
    base: VerifyRecord,
    where: tuple[str | LayerSession, str],
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
    if isinstance(place, str):
        shutil.rmtree(checkout_path(repo, place, name), ignore_errors=True)
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
