"""What every verification run did to each test, in the history database
(`.git/forge/private/history.sqlite`, beside the attempts forge/run/records/history.py keeps).

    test_runs    one row a test a lane's run reported: its outcome (passed, failed,
                 error, skipped), the tree, the lane, the verification and the run,
                 and whether the tree was a candidate not yet landed
    test_words   a person's word: `quarantine`, `release` (latest wins)
    landed_trees trees the gate landed (a quarantined test is released after
                 passing on `release_after` of them in a row)

A test is flaky on landed trees when it both passed and failed on one tree that
had landed, in runs of one kind (whole runs of its lane, or runs of some tests alone) (the integration head, the base, a commit `forge verify` or a hook
judged), and that is what quarantines it for the repository; a flip seen only on a
candidate's tree (a change the gate is judging) is evidence for that verdict alone
(`flaky_on`: `landed` or `candidate`).

Every row carries a seal (forge/base/seal.py): a row written by anything but forge
(a task that opened the file) is ignored, and counted so that `forge tests` can name
it. A file that is not forge's history (not SQLite, or another program's tables, or
a folder) is one clear error naming it; a missing file is a fresh history. Like the
attempts' history, this is a record: a database that cannot be written (a lock, a
full disk) never stops a verification.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from forge.base import seal
from forge.base.files import StateDir, connect_sqlite
from forge.errors import ForgeError
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
    at REAL NOT NULL,              -- epoch seconds
    candidate INTEGER DEFAULT 0,   -- 1: the tree was a candidate, not landed
    seal TEXT                      -- forge's seal over the row
);
CREATE INDEX IF NOT EXISTS test_runs_test ON test_runs (test, lane);
CREATE INDEX IF NOT EXISTS test_runs_tree ON test_runs (tree);
CREATE TABLE IF NOT EXISTS test_words (
    test TEXT NOT NULL,
    word TEXT NOT NULL,            -- quarantine, release
    at REAL NOT NULL,
    seal TEXT
);
CREATE TABLE IF NOT EXISTS landed_trees (
    tree TEXT PRIMARY KEY,
    at REAL NOT NULL,
    seal TEXT
);
"""
# Columns a history written by an older forge lacks: added when it is opened.
_ADDED = {
    "test_runs": (("candidate", "INTEGER DEFAULT 0"), ("seal", "TEXT")),
    "test_words": (("seal", "TEXT"),),
    "landed_trees": (("seal", "TEXT"),),
}
# Tables of forge's in the history file (the attempts' history shares it).
_OURS = {"test_runs", "test_words", "landed_trees", "attempts", "drafts"}
_checked: set[Path] = set()
# sealed(...) over each table's row, in SQL
_RUN_SEALED = "sealed(test, lane, tree, outcome, at, candidate, seal)"
_WORD_SEALED = "sealed(test, word, at, seal)"
_TREE_SEALED = "sealed(tree, at, seal)"
# Flakiness is learned from runs of one kind: a test that fails in a whole run and
# passes alone is order-dependent, not flaky, so the two are never set side by side.
_ALONE = "(kind = 'subset')"
_FAILED = "('failed', 'error')"
T = TypeVar("T")


def path_of(state: StateDir) -> Path:
    return state.history_file()


def row_seal(*values: object) -> str | None:
    """forge's seal over a row's values (None: forge has no key here)."""
    secret = seal.key()
    if secret is None:
        return None
    text = "\x1f".join("" if v is None else repr(v) for v in values)
    return hmac.new(secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def _sealed(*values: object) -> int:
    """SQL's `sealed(v1, ..., seal)`: the row was written by forge (without a key,
    nothing is sealed and every row counts)."""
    *row, given = values
    want = row_seal(*row)
    return int(want is None or (isinstance(given, str) and hmac.compare_digest(given, want)))


def check_file(path: Path) -> None:
    """A history that is not forge's is one clear error naming it (ForgeError)."""
    if path in _checked or not path.exists():
        return
    why = ""
    if path.is_dir():
        why = "a folder"
    else:
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            finally:
                con.close()
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc):
                return
            why = f"not a SQLite database ({exc})"
        else:
            if tables and not tables & _OURS:
                why = "a SQLite database without forge's tables"
    if why:
        raise ForgeError(
            f"forge's history {path} is {why}: move it aside (a missing file starts a "
            f"fresh history)"
        )
    _checked.add(path)


@contextlib.contextmanager
def connect(state: StateDir) -> Iterator[sqlite3.Connection]:
    """The history's test tables, set up (forge/base/files.py), with `sealed()`."""
    path = path_of(state)
    check_file(path)
    with connect_sqlite(path, SCHEMA) as con:
        con.create_function("sealed", -1, _sealed, deterministic=True)
        if path not in _migrated:
            _add_columns(con)
            _migrated.add(path)
        yield con


_migrated: set[Path] = set()  # history files this process brought up to date


def _add_columns(con: sqlite3.Connection) -> None:
    for table, columns in _ADDED.items():
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns:
            if name not in have:
                with contextlib.suppress(sqlite3.OperationalError):  # another process did
                    con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


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


def record(
    state: StateDir, where: RunOf, tests: Sequence[TestOutcome], *, candidate: bool = False
) -> None:
    """File each test's outcome of one run of a lane (`candidate`: on a candidate's
    tree, unless that tree has landed already)."""
    if not tests:
        return
    now = time.time()

    def write() -> None:
        with connect(state) as con:
            on = int(candidate and not _has_landed(con, where.tree))
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
                    on,
                    row_seal(t.test, where.lane, where.tree, t.outcome, now, on),
                )
                for t in tests
            ]
            con.executemany(
                "INSERT INTO test_runs (test, lane, tree, verification, key, run, kind, "
                "outcome, duration, message, log, at, candidate, seal) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )

    _quietly(write, None)


def _has_landed(con: sqlite3.Connection, tree: str) -> bool:
    sql = f"SELECT 1 FROM landed_trees WHERE tree = ? AND {_TREE_SEALED}"
    return con.execute(sql, (tree,)).fetchone() is not None


def landed(state: StateDir, tree: str) -> None:
    """The gate landed `tree`: passes on it count toward a quarantined test's release."""

    def write() -> None:
        now = time.time()
        with connect(state) as con:
            con.execute(
                "INSERT OR IGNORE INTO landed_trees (tree, at, seal) VALUES (?, ?, ?)",
                (tree, now, row_seal(tree, now)),
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
            now = time.time()
            con.execute(
                "INSERT INTO test_words (test, word, at, seal) VALUES (?, ?, ?, ?)",
                (test, word, now, row_seal(test, word, now)),
            )


def _read(state: StateDir, work: Callable[[sqlite3.Connection], T], default: T) -> T:
    if not path_of(state).exists():
        return default
    check_file(path_of(state))

    def go() -> T:
        with connect(state) as con:
            return work(con)

    return _quietly(go, default)


def flaky_since(
    state: StateDir, lane: str | None = None, *, on: str = "landed", besides: str | None = None
) -> dict[tuple[str, str], float]:
    """(lane, test) -> when it was last found flaky on a tree `on` (`landed`, or
    `candidate`; `besides` that tree): the latest time such a tree first held both a
    pass and a failure of it."""
    where = f"WHERE candidate = {int(on == 'candidate')} AND {_RUN_SEALED}"
    where += "" if lane is None else " AND lane = ?"
    where += "" if besides is None else " AND tree != ?"
    sql = (
        "SELECT lane, test, MAX(MIN(CASE WHEN outcome = 'passed' THEN at END), "
        f"MIN(CASE WHEN outcome IN {_FAILED} THEN at END)) FROM test_runs {where} "
        f"GROUP BY lane, test, tree, {_ALONE} "
        f"HAVING SUM(outcome = 'passed') > 0 AND SUM(outcome IN {_FAILED}) > 0"
    )

    def work(con: sqlite3.Connection) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        args = ([] if lane is None else [lane]) + ([] if besides is None else [besides])
        for ln, test, at in con.execute(sql, args):
            out[(ln, test)] = max(at, out.get((ln, test), 0.0))
        return out

    return _read(state, work, {})


def words(state: StateDir) -> dict[str, tuple[str, float]]:
    """test -> a person's latest word on it and when."""

    def work(con: sqlite3.Connection) -> dict[str, tuple[str, float]]:
        out: dict[str, tuple[str, float]] = {}
        for test, word, at in con.execute(
            f"SELECT test, word, at FROM test_words WHERE {_WORD_SEALED} ORDER BY at"
        ):
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
        f"WHERE r.lane = ? AND r.test IN ({marks}) AND r.outcome = 'passed' "
        "AND sealed(r.test, r.lane, r.tree, r.outcome, r.at, r.candidate, r.seal) "
        "AND sealed(l.tree, l.at, l.seal) AND r.at > "
        "COALESCE((SELECT MAX(f.at) FROM test_runs f WHERE f.lane = r.lane AND f.test = r.test "
        f"AND f.outcome IN {_FAILED} AND f.candidate = 0), 0) GROUP BY r.test"
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
    mine = f" AND {_RUN_SEALED}" + (
        "" if plan is None else " AND (key = :plan OR key LIKE :prefix)"
    )
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
        f"WHERE outcome != 'skipped'{mine} GROUP BY lane, test, tree, {_ALONE} "
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


def unsealed(state: StateDir) -> int:
    """Rows of the history forge did not write (ignored everywhere): a task or a
    person that opened the file."""

    def work(con: sqlite3.Connection) -> int:
        n = 0
        for table, check in (
            ("test_runs", _RUN_SEALED),
            ("test_words", _WORD_SEALED),
            ("landed_trees", _TREE_SEALED),
        ):
            n += con.execute(f"SELECT COUNT(*) FROM {table} WHERE NOT {check}").fetchone()[0]
        return int(n)

    return _read(state, work, 0)
