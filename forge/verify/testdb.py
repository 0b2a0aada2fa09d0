"""What every verification run did to each test, in the history database
(`.git/forge/history.sqlite`, beside the attempts forge/run/records/history.py keeps).

    test_runs    one row a test a lane's run reported: its outcome (passed, failed,
                 error, skipped), the tree, the lane, the verification and the run
    test_words   a person's word: `quarantine`, `release` (latest wins)
    landed_trees trees the gate landed (a quarantined test is released after
                 passing on `release_after` of them in a row)

A test is flaky when it both passed and failed on one tree, anywhere in the
history. Like the attempts' history, this is a record: a database that cannot be
written never stops a verification.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from forge.base.files import StateDir, connect_sqlite
from forge.frozen import frozen
from forge.verify.junit import TestOutcome

SCHEMA = """
CREATE TABLE IF NOT EXISTS test_runs (
    test TEXT NOT NULL,            -- the runner's full id (pytest's node id)
    lane TEXT NOT NULL,
    tree TEXT NOT NULL,            -- the tree the run judged
    verification TEXT NOT NULL,    -- the verification record's id
    key TEXT,                      -- a plan's name, `cli`, `hook`, ...
    run INTEGER NOT NULL,          -- the lane's run number in that verification
    kind TEXT,                     -- initial, rerun, subset
    outcome TEXT NOT NULL,         -- passed, failed, error, skipped
    duration REAL,
    message TEXT,                  -- a failure's first line
    log TEXT,                      -- the run's log
    at REAL NOT NULL               -- epoch seconds
);
CREATE INDEX IF NOT EXISTS test_runs_test ON test_runs (test, lane);
CREATE INDEX IF NOT EXISTS test_runs_tree ON test_runs (tree);
CREATE TABLE IF NOT EXISTS test_words (
    test TEXT NOT NULL,
    word TEXT NOT NULL,            -- quarantine, release
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS landed_trees (
    tree TEXT PRIMARY KEY,
    at REAL NOT NULL
);
"""
_FAILED = "('failed', 'error')"
T = TypeVar("T")


def path_of(state: StateDir) -> Path:
    return state.root / "history.sqlite"


def connect(state: StateDir) -> contextlib.AbstractContextManager[sqlite3.Connection]:
    """The history's test tables, set up (forge/base/files.py)."""
    return connect_sqlite(path_of(state), SCHEMA)


def _quietly(work: Callable[[], T], default: T) -> T:
    """A history that cannot be read or written (a full disk, a lock held past the
    busy timeout) never stops a verification."""
    try:
        return work()
    except (sqlite3.Error, OSError):
        return default


@frozen
class RunOf:
    """Where a lane's run happened: what each of its test rows is filed under."""

    verification: str
    key: str
    lane: str
    tree: str
    run: int
    kind: str
    log: str


def record(state: StateDir, where: RunOf, tests: Sequence[TestOutcome]) -> None:
    """File each test's outcome of one run of a lane."""
    if not tests:
        return
    now = time.time()
    rows = [
        (
            t.test,
            where.lane,
            where.tree,
            where.verification,
            where.key,
            where.run,
            where.kind,
            t.outcome,
            t.duration,
            t.message,
            where.log,
            now,
        )
        for t in tests
    ]

    def write() -> None:
        with connect(state) as con:
            con.executemany(
                "INSERT INTO test_runs (test, lane, tree, verification, key, run, kind, "
                "outcome, duration, message, log, at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )

    _quietly(write, None)


def landed(state: StateDir, tree: str) -> None:
    """The gate landed `tree`: passes on it count toward a quarantined test's release."""

    def write() -> None:
        with connect(state) as con:
            con.execute(
                "INSERT OR IGNORE INTO landed_trees (tree, at) VALUES (?, ?)", (tree, time.time())
            )

    _quietly(write, None)


def say(state: StateDir, test: str, word: str) -> None:
    """A person's word on a test: `quarantine`, `release`, or `forget` (its history
    and earlier words are dropped)."""
    with connect(state) as con:
        if word == "forget":
            con.execute("DELETE FROM test_runs WHERE test = ?", (test,))
            con.execute("DELETE FROM test_words WHERE test = ?", (test,))
        else:
            con.execute(
                "INSERT INTO test_words (test, word, at) VALUES (?, ?, ?)",
                (test, word, time.time()),
            )


def _read(state: StateDir, work: Callable[[sqlite3.Connection], T], default: T) -> T:
    if not path_of(state).exists():
        return default

    def go() -> T:
        with connect(state) as con:
            return work(con)

    return _quietly(go, default)


def flaky_since(state: StateDir, lane: str | None = None) -> dict[tuple[str, str], float]:
    """(lane, test) -> when it was last found flaky: the latest time a tree first
    held both a pass and a failure of it."""
    where = "" if lane is None else "WHERE lane = ?"
    sql = (
        "SELECT lane, test, MAX(MIN(CASE WHEN outcome = 'passed' THEN at END), "
        f"MIN(CASE WHEN outcome IN {_FAILED} THEN at END)) FROM test_runs {where} "
        "GROUP BY lane, test, tree "
        f"HAVING SUM(outcome = 'passed') > 0 AND SUM(outcome IN {_FAILED}) > 0"
    )

    def work(con: sqlite3.Connection) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for ln, test, at in con.execute(sql, () if lane is None else (lane,)):
            out[(ln, test)] = max(at, out.get((ln, test), 0.0))
        return out

    return _read(state, work, {})


def words(state: StateDir) -> dict[str, tuple[str, float]]:
    """test -> a person's latest word on it and when."""

    def work(con: sqlite3.Connection) -> dict[str, tuple[str, float]]:
        out: dict[str, tuple[str, float]] = {}
        for test, word, at in con.execute("SELECT test, word, at FROM test_words ORDER BY at"):
            out[test] = (word, at)
        return out

    return _read(state, work, {})


def passes_on_landed_since_failure(
    state: StateDir, lane: str, tests: Sequence[str]
) -> dict[str, int]:
    """test -> its passes on landed trees after its last failure (anywhere)."""
    if not tests:
        return {}
    marks = ",".join("?" * len(tests))
    sql = (
        "SELECT r.test, COUNT(DISTINCT r.tree) FROM test_runs r JOIN landed_trees l ON l.tree = r.tree "
        f"WHERE r.lane = ? AND r.test IN ({marks}) AND r.outcome = 'passed' AND r.at > "
        "COALESCE((SELECT MAX(f.at) FROM test_runs f WHERE f.lane = r.lane AND f.test = r.test "
        f"AND f.outcome IN {_FAILED}), 0) GROUP BY r.test"
    )

    def work(con: sqlite3.Connection) -> dict[str, int]:
        return {test: n for test, n in con.execute(sql, (lane, *tests))}

    return _read(state, work, {})


@frozen
class Tally:
    """What the history says of one test in one lane."""

    test: str
    lane: str
    runs: int
    failures: int
    last_seen: float
    last_failure: tuple[str, str, str, float] | None  # tree, message, log, when
    runs_on_mixed_trees: int  # runs on trees where it also passed
    failures_on_mixed_trees: int


def tallies(state: StateDir, plan: str | None = None) -> list[Tally]:
    """Every test the history holds, by lane and id (`plan`: only from the runs of
    that plan's verifications)."""
    mine = "" if plan is None else " AND (key = :plan OR key LIKE :prefix)"
    args = {} if plan is None else {"plan": plan, "prefix": f"{plan}.%"}

    def work(con: sqlite3.Connection) -> list[Tally]:
        counts = con.execute(
            f"SELECT test, lane, COUNT(*), SUM(outcome IN {_FAILED}), MAX(at) FROM test_runs "
            f"WHERE outcome != 'skipped'{mine} GROUP BY lane, test ORDER BY lane, test",
            args,
        ).fetchall()
        last: dict[tuple[str, str], tuple[str, str, str, float]] = {}
        for test, lane, tree, message, log, at in con.execute(
            "SELECT test, lane, tree, message, log, at FROM test_runs "
            f"WHERE outcome IN {_FAILED}{mine} ORDER BY at",
            args,
        ):
            last[(lane, test)] = (tree, message or "", log or "", at)
        mixed: dict[tuple[str, str], tuple[int, int]] = {}
        for test, lane, n, bad in con.execute(
            f"SELECT test, lane, COUNT(*), SUM(outcome IN {_FAILED}) FROM test_runs WHERE tree IN "
            "(SELECT tree FROM test_runs p WHERE p.test = test_runs.test AND p.lane = test_runs.lane "
            f"AND p.outcome = 'passed') AND outcome != 'skipped'{mine} GROUP BY lane, test",
            args,
        ):
            mixed[(lane, test)] = (n, bad or 0)
        return [
            Tally(
                test=test,
                lane=lane,
                runs=n,
                failures=bad or 0,
                last_seen=at,
                last_failure=last.get((lane, test)),
                runs_on_mixed_trees=mixed.get((lane, test), (0, 0))[0],
                failures_on_mixed_trees=mixed.get((lane, test), (0, 0))[1],
            )
            for test, lane, n, bad, at in counts
        ]

    return _read(state, work, [])


def first_flaky(state: StateDir, plan: str | None = None) -> dict[tuple[str, str], float]:
    """(lane, test) -> when it first showed flaky: on the first tree where it had both
    passed and failed, the time the second of those outcomes came."""
    mine = "" if plan is None else " AND (key = :plan OR key LIKE :prefix)"
    args = {} if plan is None else {"plan": plan, "prefix": f"{plan}.%"}
    sql = (
        "SELECT lane, test, MIN(seen) FROM (SELECT lane, test, "
        "MAX(MIN(CASE WHEN outcome = 'passed' THEN at END), "
        f"MIN(CASE WHEN outcome IN {_FAILED} THEN at END)) AS seen FROM test_runs "
        f"WHERE outcome != 'skipped'{mine} GROUP BY lane, test, tree "
        f"HAVING SUM(outcome = 'passed') > 0 AND SUM(outcome IN {_FAILED}) > 0) "
        "GROUP BY lane, test"
    )

    def work(con: sqlite3.Connection) -> dict[tuple[str, str], float]:
        return {(lane, test): at for lane, test, at in con.execute(sql, args)}

    return _read(state, work, {})


def outcomes(state: StateDir, verification: str) -> list[tuple[str, int, TestOutcome]]:
    """Each test's outcome in one verification (its record's id): (lane, run, outcome),
    in the order they were filed."""

    def work(con: sqlite3.Connection) -> list[tuple[str, int, TestOutcome]]:
        return [
            (lane, run, TestOutcome(test, outcome, duration or 0.0, message or ""))
            for lane, run, test, outcome, duration, message in con.execute(
                "SELECT lane, run, test, outcome, duration, message FROM test_runs "
                "WHERE verification = ? ORDER BY rowid",
                (verification,),
            )
        ]

    return _read(state, work, [])
