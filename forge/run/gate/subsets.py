"""Running only some tests of a lane, for the gate's confirming reruns, its look at
the integration head and its bisection steps (forge/run/gate/by_tests.py).

A lane's command recognised as pytest (`pytest -q`, `python -m pytest tests`,
`.venv/bin/pytest`: one simple command, no shell operators) runs a subset as the
same command with its own paths left out and the tests' node ids given instead;
`first` adds `-x` (stop at the first failure). Any other command cannot run a
subset: the gate runs the whole lane as before.

A subset runs in the lane's own checkouts (prepared and set up as for the whole
lane) and is recorded like any verification, but never answers from the verdict
cache nor enters it, and never becomes the key's latest verdict.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from forge.frozen import frozen
from forge.git.repo import Repository
from forge.plan.repo_config import VerifyConfig
from forge.run.state.gate_story import StepKind as Kind
from forge.verify import engine as verify
from forge.verify import records as verify_records
from forge.verify.flakes import Fixed, Reruns, exists_at, failing_tests
from forge.verify.quarantine import tests_known_flaky, tests_seen_flipping
from forge.verify.records import LaneRun, Verdict, VerifyRecord

if TYPE_CHECKING:
    from forge.run.gate.by_tests import Judged

Tests = Mapping[str, frozenset[str]]  # lane -> the ids of some of its tests

_OPERATORS = {"&&", "||", ";", "|", "&", ">", ">>", "<", "(", ")"}
# pytest options that take the next word as their value (so it is not a path)
_VALUED = {
    "-k", "-m", "-c", "-p", "-o", "-W", "-n", "-r", "--rootdir", "--confcutdir",
    "--ignore", "--ignore-glob", "--deselect", "--basetemp", "--junitxml",
    "--junit-xml", "--override-ini", "--maxfail", "--tb", "--durations",
    "--capture", "--import-mode", "--log-level", "--cov", "--cov-report", "--dist",
    "--timeout", "--inifile", "--config-file", "--log-file", "--lfnf",
    "--last-failed-no-failures", "--cache-dir",
}  # fmt: skip


def _pytest_at(words: list[str]) -> int | None:
    """Where pytest's own arguments start in a simple command, if it runs pytest."""
    for i, word in enumerate(words):
        name = os.path.basename(word)
        if name in ("pytest", "py.test"):
            return i + 1
        if word == "-m" and i + 1 < len(words) and words[i + 1] in ("pytest", "py.test"):
            return i + 2
    return None


def subset_command(command: str, tests: Sequence[str], *, first: bool) -> str | None:
    """The lane's command running only `tests` (None: it cannot)."""
    if not tests or any(c in command for c in ("`", "$(", "\n")):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    start = _pytest_at(words)
    if start is None or any(w in _OPERATORS for w in words):
        return None
    kept = words[:start]
    args = words[start:]
    i = 0
    while i < len(args):
        word = args[i]
        if word.startswith("-"):
            kept.append(word)
            if word in _VALUED and i + 1 < len(args):
                kept.append(args[i + 1])
                i += 1
        # else: a path of the whole run's (the tests' own ids take its place)
        i += 1
    return shlex.join([*kept, *(["-x"] if first else []), *sorted(tests)])


def regressions(gate_on: str | None, config: VerifyConfig) -> bool:
    """`gate_on` (the plan's, else [verify]'s) is "regressions", the default."""
    return (gate_on or config.gate_on or "regressions") == "regressions"


@frozen
class Where:
    """Where and how a verification of some tests runs: in the checkouts of `key`,
    stopped by `stop`, telling `on_event`, under the sandbox when `sandbox`."""

    key: str
    stop: threading.Event
    on_event: Callable[[str], None]
    sandbox: bool = False
    on_stage: Callable[[str], None] | None = None  # hears what a lane starts
    candidate: bool = True  # the commit is a candidate, not the integration head


def head_has_them(
    repo: Repository, head: str, config: VerifyConfig, record: VerifyRecord, where: Where
) -> bool:
    """Whether every failing test of `record` (a FAIL) fails on `head` too, run there."""
    failing = failing_by_lane(config, record)
    if not failing:
        return False
    asked = {
        lane: frozenset(t for t in ids if exists_at(repo, head, t)) for lane, ids in failing.items()
    }
    if asked != failing:
        return False  # a test the head does not have is new
    judged = run_subset(repo, head, config, asked, first=False, where=where)
    if judged is None or judged.verdict != Verdict.FAIL:
        return False
    on_head = failing_by_lane(config, judged) or {}
    return all(ids <= on_head.get(lane, frozenset()) for lane, ids in asked.items())


def can_subset(config: VerifyConfig, lane: str) -> bool:
    command = dict(config.lanes).get(lane)
    return command is not None and subset_command(command, ["t"], first=False) is not None


def run_subset(
    repo: Repository,
    commit: str,
    config: VerifyConfig,
    tests: Tests,
    *,
    first: bool,
    where: Where,
) -> VerifyRecord | None:
    """Run `tests` (lane by lane) on `commit`, each lane once (None: some lane cannot
    run a subset)."""
    commands = dict(config.lanes)
    lanes = []
    for lane, ids in tests.items():
        if not ids:
            continue
        cmd = subset_command(commands.get(lane, ""), sorted(ids), first=first)
        if cmd is None:
            return None
        lanes.append((lane, cmd))
    if not lanes:
        return None
    only = replace(config, lanes=tuple(lanes), reruns=0)
    return verify.verify_commit(
        repo,
        commit,
        only,
        key=where.key,
        stop=where.stop,
        ask=verify.Ask(
            force=True,
            on_event=where.on_event,
            sandbox=where.sandbox,
            reruns=Fixed(0),
            remember=False,
            on_stage=where.on_stage,
            candidate=where.candidate,
            chosen=True,
        ),
    )


def failing_by_lane(config: VerifyConfig, record: VerifyRecord) -> dict[str, frozenset[str]] | None:
    """A FAIL's failing tests by lane; None when a failing lane names none, or its
    command cannot run them alone."""
    out = {}
    for lane in record.lanes:
        if lane.verdict != Verdict.FAIL:
            continue
        tests = failing_tests(lane.runs[-1]) if lane.runs else frozenset()
        if not tests or not can_subset(config, lane.name):
            return None
        out[lane.name] = tests
    return out or None


@dataclass
class SubsetFirst:
    """The gate's rerun rule for a whole verification: a failing lane whose tests
    are named and can run alone is not rerun whole (the gate reruns those tests);
    any other failure follows `inner` (forge/verify/flakes.py)."""

    config: VerifyConfig
    inner: Reruns

    def again(self, lane: str, runs: Sequence[LaneRun]) -> bool:
        if failing_tests(runs[-1]) and can_subset(self.config, lane):
            return False
        return self.inner.again(lane, runs)


class Judge(Protocol):
    """The gate's whole verification of a commit (forge/run/gate/verifying.py)."""

    def __call__(
        self,
        commit: str,
        key: str | None = None,
        forgive: Tests | None = None,
        *,
        again: bool = False,
        kind: Kind = Kind.BATCH,
    ) -> VerifyRecord: ...


@dataclass
class GateProbe:
    """The gate's side of forge/run/gate/by_tests.py: whole verifications through
    the gate's own judge, subsets here, each subset kept as a gate step."""

    repo: Repository
    config: VerifyConfig
    key: str
    stop: threading.Event
    sandbox: bool
    judge: Judge
    on_event: Callable[[str], None]
    on_step: Callable[[str, float, VerifyRecord], None]
    on_doing: Callable[[str], None] = lambda _what: None
    on_stage: Callable[[str], None] | None = None
    runs: int = 0  # subset runs made
    _seen: dict[tuple[str, str], bool] = field(default_factory=dict)

    def whole(self, commit: str, forgive: Tests) -> VerifyRecord:
        # (kept as a `prefix` step: a whole run the judging by tests asks for)
        return self.judge(commit, None, forgive, again=True, kind=Kind.PREFIX)

    def passes_whole(self, commit: str, tests: Tests) -> bool | None:
        """A remembered PASS or FLAKY of the commit's tree whose whole runs left none
        of `tests` out: it passed them there."""
        tree = self.repo.tree_of(commit)
        known = verify_records.cached(self.repo.state, tree, self.config.fingerprint())
        if known is None:
            return None
        out = {(lane, t) for lane, t, _why in known.deselected}
        return not any((lane, t) in out for lane, ids in tests.items() for t in ids)

    def flakiness(self, lane: str, test: str, besides: str | None = None) -> int:
        """2: flaky on landed trees; 1: seen flipping on a candidate's (a tree other
        than the commit `besides`'s); 0: neither."""
        if test in tests_known_flaky(self.repo, lane):
            return 2
        tree = None if besides is None else self.repo.tree_of(besides)
        return int(test in tests_seen_flipping(self.repo, lane, tree))

    def failing(self, judged: Judged) -> dict[str, frozenset[str]] | None:
        assert isinstance(judged, VerifyRecord)
        return failing_by_lane(self.config, judged)

    def subset(
        self, commit: str, tests: Tests, *, first: bool, why: str, landed: bool = False
    ) -> VerifyRecord | None:
        if not any(tests.values()):
            return None
        names = sorted(t for ids in tests.values() for t in ids)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        self.on_event(f"gate: {why}: running {shown} on {commit[:12]}")
        self.on_doing(f"{why}: running {len(names)} failing test(s) ({shown}) on {commit[:12]}")
        started = time.time()
        record = run_subset(
            self.repo,
            commit,
            self.config,
            tests,
            first=first,
            where=Where(
                self.key,
                self.stop,
                lambda msg: self.on_event(f"gate [{why}]: {msg}"),
                sandbox=self.sandbox,
                on_stage=self.on_stage,
                candidate=not landed,
            ),
        )
        if record is not None:
            self.runs += 1
            self.on_step(why, started, record)
        return record

    def exists(self, commit: str, test: str) -> bool:
        known = self._seen.get((commit, test))
        if known is None:
            known = self._seen[(commit, test)] = exists_at(self.repo, commit, test)
        return known

    def recheck(self, commit: str, tests: Tests) -> VerifyRecord | None:
        """The culprit's own failing tests, `tests`, once more on its own tree before it
        is blamed: the run (None: it could not be made, or was stopped). Those that
        pass now are flaky on evidence (the history holds both runs) and blame nobody;
        those that fail again are the culprit's reason."""
        if not tests:
            return None
        # They must fail every time, twice: a flake met for the first time may fail
        # the whole run, alone and once more (1 in 16 for a test failing half its runs).
        left = dict(tests)
        again: VerifyRecord | None = None
        for _ in range(2):
            again = self.subset(commit, left, first=False, why="the culprit's failing tests again")
            if again is None or again.verdict == Verdict.INTERRUPTED:
                return None
            failed = (self.failing(again) or {}) if again.verdict == Verdict.FAIL else {}
            left = {lane: ids & left.get(lane, frozenset()) for lane, ids in failed.items()}
            left = {lane: ids for lane, ids in left.items() if ids}
            if not left:
                break
        return again

    def after_landing(self, tip: str, record: VerifyRecord) -> dict[str, frozenset[str]]:
        """The tests the landing whole run left out, run on the landed tree: their
        outcome feeds the history (a quarantined test's release, what the head fails)
        and never the verdict. Those that failed there, by lane."""
        left: dict[str, set[str]] = {}
        for lane, t, _why in record.deselected:
            if can_subset(self.config, lane):
                left.setdefault(lane, set()).add(t)
        tests = {lane: frozenset(ids) for lane, ids in left.items()}
        if not tests:
            return {}
        judged = self.subset(
            tip, tests, first=False, why="left out, on the landed tree", landed=True
        )
        if judged is None or judged.verdict != Verdict.FAIL:
            return {}
        failed = self.failing(judged) or {}
        return {lane: ids & tests.get(lane, frozenset()) for lane, ids in failed.items()}
