"""`forge tests`: what forge knows of each test, from every verification run.

One row a test and lane: its runs, failures, whether it is flaky (it passed and
failed on one tree) and its estimated failure rate, whether it is quarantined
(and why), its last failure and when it was last seen. A person's word
(`--quarantine`, `--release`, `--forget`) is recorded in the history database.
"""

from __future__ import annotations

import time
from typing import TypedDict

from forge.base.text import text_table
from forge.errors import ForgeError
from forge.git.repo import Repository, short_sha
from forge.plan.repo_config import VerifyConfig
from forge.run.state.records import by_gate
from forge.run.state.run_state import RunState, Status
from forge.verify import quarantine, testdb


class LastFailure(TypedDict):
    tree: str
    message: str
    log: str
    at: str  # ISO time, UTC


class KnownTest(TypedDict):
    """One test in one lane, as `forge tests --json` gives it."""

    test: str
    lane: str
    runs: int
    failures: int
    flaky: bool
    # where it passed and failed on one tree: "landed" (the integration head, the
    # base, a commit a person or a hook verified: it is quarantined), "candidate" (a
    # change the gate judged: evidence for that change's verdict alone), None
    flaky_on: str | None
    flake_rate: float | None  # None: not flaky
    quarantined: bool
    why: str | None
    last_failure: LastFailure | None
    last_seen: str
    flaky_since: str | None  # ISO time, UTC: when it first both passed and failed on a tree
    blamed: list[str]  # the tasks the gate failed for it, `plan/task` (`(cleared)`: given back)


def tests_data(
    repo: Repository,
    *,
    plan: str | None = None,
    config: VerifyConfig | None = None,
    flaky: bool = False,
    failing: bool = False,
) -> list[KnownTest]:
    """One object a test and lane (`flaky`: only flaky tests; `failing`: only those
    whose last run failed)."""
    pol = quarantine.policy(repo, config)
    tallies = testdb.tallies(repo.state, plan)
    since = testdb.first_flaky(repo.state, plan)
    blamed = _blamed(repo, plan)
    by_lane: dict[str, list[testdb.Tally]] = {}
    for tally in tallies:
        by_lane.setdefault(tally.lane, []).append(tally)
    out: list[KnownTest] = []
    on_candidates = testdb.flaky_since(repo.state, on="candidate")
    for lane, rows in by_lane.items():
        standing = quarantine.standings(repo, pol, lane, [t.test for t in rows])
        for t in rows:
            s = standing[t.test]
            on = "landed" if s.flaky else "candidate" if (lane, t.test) in on_candidates else None
            last = t.last_failure
            failed_last = last is not None and last[3] >= t.last_seen
            if (flaky and on is None) or (failing and not failed_last):
                continue
            out.append(
                {
                    "test": t.test,
                    "lane": lane,
                    "runs": t.runs,
                    "failures": t.failures,
                    "flaky": on is not None,
                    "flaky_on": on,
                    "flake_rate": _rate(t) if on is not None else None,
                    "quarantined": s.quarantined,
                    "why": s.why or None,
                    "last_failure": None
                    if last is None
                    else {"tree": last[0], "message": last[1], "log": last[2], "at": _iso(last[3])},
                    "last_seen": _iso(t.last_seen),
                    "flaky_since": _iso(at)
                    if s.flaky and (at := since.get((lane, t.test))) is not None
                    else None,
                    "blamed": blamed.get(t.test, []),
                }
            )
    return out


def _blamed(repo: Repository, plan: str | None) -> dict[str, list[str]]:
    """test -> the tasks the gate failed for it, in every plan's run state (or `plan`'s)."""
    from forge.run.state.store import StateStore

    out: dict[str, list[str]] = {}
    for name in [plan] if plan is not None else repo.state.recorded_plans():
        try:
            state = StateStore(repo.state, name).load_existing()
        except ForgeError:
            continue  # a state that cannot be read names nobody
        for test, tasks in blamed_by(state).items() if state is not None else []:
            out.setdefault(test, []).extend(f"{name}/{t}" for t in tasks)
    return out


def blamed_by(state: RunState) -> dict[str, tuple[str, ...]]:
    """test -> the tasks of a plan the gate failed for it: those still blamed, and
    those whose blame was given back (`b (cleared)`, from the steps that blamed them)."""
    out: dict[str, list[str]] = {}
    for tid, ts in state.tasks.items():
        last = ts.last
        if ts.status == Status.FAILED and last is not None and by_gate(last.feedback_source):
            for f in last.failures:
                if f.test and tid not in out.setdefault(f.test, []):
                    out[f.test].append(tid)
    for step in state.gate_steps:
        for tid in step.cleared:
            for test in (g.test for g in step.failures if g.test):
                said = f"{tid} (cleared)"
                if said not in out.setdefault(test, []):
                    out[test].append(said)
    return {test: tuple(tasks) for test, tasks in out.items()}


def _rate(t: testdb.Tally) -> float:
    """Its failure rate on the trees where it also passed (a real breakage of it on
    other trees is not its flakiness)."""
    runs = t.runs_on_mixed_trees or t.runs
    bad = t.failures_on_mixed_trees if t.runs_on_mixed_trees else t.failures
    return round(bad / runs, 3) if runs else 0.0


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


TEST_WIDTH = 64  # the test column's widest: a parametrized id made a 300-column table


def render(rows: list[KnownTest], *, only: str = "", known: int = 0) -> list[str]:
    """The table; `only` names the filter the rows went through ("flaky", "failing")
    and `known` how many tests forge knows without it, so that an empty answer says
    which of the two is empty."""
    if not rows:
        if only and known:
            what = "flaky test" if only == "flaky" else "test whose last run failed"
            return [f"no {what} among the {known} tests forge knows (`forge tests` lists them)"]
        return ["no test runs recorded yet (forge records them at each verification)"]
    table = []
    for r in rows:
        since = f", since {r['flaky_since'][:10]}" if r["flaky_since"] else ""
        flaky = f"{r['flaky_on']} ({r['flake_rate']:.0%}{since})" if r["flaky"] else "no"
        held = f"yes ({r['why']})" if r["quarantined"] else "no"
        last = r["last_failure"]
        failed = "-" if last is None else f"{short_sha(last['tree'])} {last['message'][:60]}"
        table.append(
            [
                _cut(r["test"], TEST_WIDTH),
                r["lane"],
                str(r["runs"]),
                str(r["failures"]),
                flaky,
                held,
                failed,
                r["last_seen"],
                ", ".join(r["blamed"]) or "-",
            ]
        )
    heads = [
        "test",
        "lane",
        "runs",
        "failures",
        "flaky",
        "quarantined",
        "last failure",
        "last seen",
        "blamed",
    ]
    lines = text_table(heads, table)
    logs = [f"  {r['test']}: log {last['log']}" for r in rows if (last := r["last_failure"])]
    cut = any(len(r["test"]) > TEST_WIDTH for r in rows)
    whole = ["", "(a long test id is cut in the middle; `--json` and the logs name it whole)"]
    return [*lines, *(whole if cut else []), *(["", "last failures' logs:", *logs] if logs else [])]


def _cut(test: str, width: int) -> str:
    """`test` in at most `width` characters, cut in the middle: its file and the end of
    its parameters stay readable."""
    if len(test) <= width:
        return test
    tail = width // 3
    return f"{test[: width - tail - 1]}…{test[-tail:]}"


def ignored_rows(repo: Repository) -> list[str]:
    """A line naming the history's rows forge did not write (they are ignored)."""
    n = testdb.unsealed(repo.state)
    if not n:
        return []
    return [
        "",
        f"ignored: {n} row(s) of {testdb.path_of(repo.state)} that forge did not write "
        "(a person's word is given with --quarantine and --release)",
    ]


def word(repo: Repository, test: str, what: str) -> str:
    """Record a person's word on `test` (`quarantine`, `release`, `forget`)."""
    if not test.strip():
        raise ForgeError("name the test (its full id, as `forge tests` lists it)")
    try:
        test.encode("utf-8")
    except UnicodeEncodeError:
        shown = test.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise ForgeError(
            f"`{shown}` is not UTF-8 text: a test's id is (as `forge tests` lists it)"
        ) from None
    known = {t.test for t in testdb.tallies(repo.state)}
    if what != "quarantine" and test not in known and test not in testdb.words(repo.state):
        raise ForgeError(f"no test `{test}` in forge's history (`forge tests` lists them)")
    testdb.say(repo.state, test, what)
    done = {"quarantine": "quarantined", "release": "released", "forget": "forgotten"}[what]
    return f"{test}: {done} (a person's word, recorded)\n"
