"""Every attempt of every run, retry and plan, in a SQLite database
(`.git/forge/private/history.sqlite`): what `forge stats`, the `auto` agent and the
forecast of `forge plan` learn from.

One row per attempt, written when the attempt ends and updated when the gate
later lands it or blames it (`landed`, `culprit`). Runs of different plans
write at once: WAL mode and a busy timeout serialise them, and any SQLite
tool can read the file while they do. A history that cannot be written never
stops a run: it is a record, not a state.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from forge.base.files import connect_sqlite, read_sqlite
from forge.frozen import frozen
from forge.run.state.records import by_gate
from forge.run.state.run_state import UNCOUNTED, Attempt, Status

if TYPE_CHECKING:
    from forge.base.files import StateDir
    from forge.plan.model import Task
    from forge.run.context import RunContext

SCHEMA_VERSION = 2  # 2: the `drafts` table
SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    tag TEXT PRIMARY KEY,          -- plan/task/number/pid: one attempt
    plan TEXT NOT NULL,
    task TEXT NOT NULL,
    number INTEGER NOT NULL,       -- the attempt's number in the task
    run_started TEXT,              -- the run it belongs to (its start, ISO 8601)
    agent TEXT NOT NULL,           -- the spec as it ran: name[:model[:effort]], or "run"
    model TEXT,                    -- the model asked for
    effort TEXT,
    models TEXT,                   -- JSON list: the models the CLI reported it used
    model_mismatch TEXT,           -- "asked opus, ran claude-sonnet-4-5" (NULL: none seen)
    files INTEGER,                 -- size features: the task's `files` entries,
    prompt_chars INTEGER,          -- its prompt's length,
    estimate REAL,                 -- and its estimate
    outcome TEXT NOT NULL,         -- the attempt's status (QUEUED until the gate decides)
    infra_kind TEXT,               -- for INFRA: rate-limit, quota, auth, model, ...
    reason TEXT,
    landed INTEGER NOT NULL DEFAULT 0,   -- 1 when this attempt's work landed
    culprit INTEGER NOT NULL DEFAULT 0,  -- 1 when the gate blamed it
    cost_usd REAL,                 -- reported, else priced; NULL when unknown
    input_tokens INTEGER,
    output_tokens INTEGER,
    started REAL,                  -- epoch seconds
    ended REAL,
    seconds REAL,                  -- the attempt's own duration
    phases TEXT,                   -- JSON {phase: seconds}
    landed_at REAL,                -- epoch seconds, when it landed
    propensity REAL,               -- for a chosen (`auto`) spec: the choice's probability
    chosen_from TEXT               -- JSON list: the specs it was chosen from
);
CREATE INDEX IF NOT EXISTS attempts_agent ON attempts (agent);
CREATE INDEX IF NOT EXISTS attempts_started ON attempts (started);
CREATE TABLE IF NOT EXISTS drafts (
    tag TEXT PRIMARY KEY,          -- draft:name/try/pid/ns: one try of a planner
    name TEXT NOT NULL,            -- the drafted plan's name
    try INTEGER NOT NULL,
    agent TEXT NOT NULL,           -- the planner's spec as it ran
    model TEXT,
    effort TEXT,
    models TEXT,                   -- JSON list: the models the CLI reported it used
    outcome TEXT NOT NULL,         -- SOUND, UNSOUND (problems), INFRA, FAILED, TIMEOUT
    reason TEXT,
    cost_usd REAL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    prompt_chars INTEGER,
    started REAL,
    seconds REAL
);
"""


def path_of(state: StateDir) -> Path:
    return state.history_file()


def connect(path: Path) -> contextlib.AbstractContextManager[sqlite3.Connection]:
    """The history at `path`, its schema set up (forge/base/files.py)."""
    return connect_sqlite(path, SCHEMA, version=SCHEMA_VERSION)


def _quietly(write: Callable[[], None]) -> None:
    # A history that cannot be written (a full disk, a locked file past the busy
    # timeout) never stops a run.
    with contextlib.suppress(sqlite3.Error, OSError):
        write()


def _phases(attempt: Attempt) -> str:
    spent: dict[str, float] = {}
    for p in attempt.phases:
        if p.end is not None:
            spent[p.name] = round(spent.get(p.name, 0.0) + p.end - p.start, 3)
    return json.dumps(spent)


def record(ctx: RunContext, task: Task, attempt: Attempt) -> None:
    """Write (or rewrite) the row of an attempt that just ended."""
    from forge.run.records.spend import attempt_usd

    if attempt.tag is None:
        return
    usd = attempt_usd(attempt, ctx.repo_config.all_prices())
    now = time.time()
    seconds = attempt.duration or 0.0
    row = {
        "tag": attempt.tag,
        "plan": ctx.plan.name,
        "task": task.id,
        "number": attempt.number,
        "run_started": ctx.state.started,
        "agent": attempt.agent,
        "model": attempt.model,
        "effort": attempt.effort,
        "models": json.dumps(attempt.models) if attempt.models else None,
        "model_mismatch": attempt.model_mismatch,
        "files": len(task.files),
        "prompt_chars": len(task.prompt or task.run or ""),
        "estimate": task.estimate,
        "outcome": str(attempt.status),
        "infra_kind": attempt.infra_kind if attempt.status == Status.INFRA else None,
        "reason": attempt.reason,
        "landed": int(attempt.status == Status.MERGED),
        "culprit": 0,
        "cost_usd": usd,
        "input_tokens": attempt.input_tokens,
        "output_tokens": attempt.output_tokens,
        "started": now - seconds,
        "ended": now,
        "seconds": seconds,
        "phases": _phases(attempt),
        "landed_at": now if attempt.status == Status.MERGED else None,
        "propensity": attempt.propensity,
        "chosen_from": json.dumps(attempt.chosen_from) if attempt.chosen_from else None,
    }
    keys = ", ".join(row)
    marks = ", ".join(f":{k}" for k in row)

    def write() -> None:
        with connect(path_of(ctx.repo.state)) as con:
            con.execute(f"INSERT OR REPLACE INTO attempts ({keys}) VALUES ({marks})", row)

    _quietly(write)


def settle(ctx: RunContext, task_ids: Sequence[str]) -> None:
    """The gate decided: each task's last attempt landed, was blamed, or conflicted."""
    updates = []
    now = time.time()
    for tid in task_ids:
        last = ctx.state.tasks[tid].last
        if last is None or last.tag is None:
            continue
        culprit = last.status == Status.FAILED and by_gate(last.feedback_source)
        landed = last.status == Status.MERGED
        status = str(last.status)
        updates.append(
            (status, last.reason, int(landed), int(culprit), now if landed else None, last.tag)
        )

    def write() -> None:
        with connect(path_of(ctx.repo.state)) as con:
            con.executemany(
                "UPDATE attempts SET outcome = ?, reason = ?, landed = ?, culprit = ?, "
                "landed_at = COALESCE(?, landed_at) WHERE tag = ?",
                updates,
            )

    if updates:
        _quietly(write)


def record_draft(
    state: StateDir,
    name: str,
    attempt: Attempt,
    *,
    outcome: str,
    usd: float | None,
    prompt_chars: int,
) -> None:
    """Write the row of one try of a planner (`forge draft`). `outcome`: SOUND or
    UNSOUND when it answered, else the attempt's status (INFRA, FAILED, TIMEOUT)."""
    seconds = attempt.duration or 0.0
    row = {
        "tag": attempt.tag,
        "name": name,
        "try": attempt.number,
        "agent": attempt.agent,
        "model": attempt.model,
        "effort": attempt.effort,
        "models": json.dumps(attempt.models) if attempt.models else None,
        "outcome": outcome,
        "reason": attempt.reason,
        "cost_usd": usd,
        "input_tokens": attempt.input_tokens,
        "output_tokens": attempt.output_tokens,
        "prompt_chars": prompt_chars,
        "started": time.time() - seconds,
        "seconds": seconds,
    }
    keys = ", ".join(row)
    marks = ", ".join(f":{k}" for k in row)

    def write() -> None:
        with connect(path_of(state)) as con:
            con.execute(f"INSERT OR REPLACE INTO drafts ({keys}) VALUES ({marks})", row)

    _quietly(write)


def restate(ctx: RunContext, attempt: Attempt) -> None:
    """An ended attempt's outcome or reason changed after its row was written (a
    best-of-N loser: stopped because another won, or passed and not chosen)."""
    if attempt.tag is None:
        return
    values = (str(attempt.status), attempt.reason, attempt.tag)

    def write() -> None:
        with connect(path_of(ctx.repo.state)) as con:
            con.execute("UPDATE attempts SET outcome = ?, reason = ? WHERE tag = ?", values)

    _quietly(write)


@frozen
class Row:
    plan: str
    task: str
    agent: str
    outcome: str
    landed: bool
    culprit: bool
    cost_usd: float | None
    input_tokens: int | None
    output_tokens: int | None
    started: float
    seconds: float
    landed_at: float | None
    files: int
    prompt_chars: int
    model_mismatch: str | None
    models: str | None = None  # JSON: the models the CLI reported (None: it named none)
    reason: str | None = None

    @property
    def spent_attempt(self) -> bool:
        return self.outcome not in UNCOUNTED

    @property
    def infra(self) -> bool:
        return self.outcome == Status.INFRA


def rows(state: StateDir, *, plan: str | None = None, since: float | None = None) -> list[Row]:
    """The recorded attempts, oldest first (none when there is no history)."""
    path = path_of(state)
    if not path.exists():
        return []
    where, args = _where(("plan", plan), since)
    sql = (
        "SELECT plan, task, agent, outcome, landed, culprit, cost_usd, input_tokens, "
        "output_tokens, started, seconds, landed_at, files, prompt_chars, model_mismatch, "
        "models, reason FROM attempts" + where + " ORDER BY started"
    )
    found = _select(path, sql, args)
    return [_row(r) for r in found]


def draft_rows(
    state: StateDir, *, plan: str | None = None, since: float | None = None
) -> list[Row]:
    """The tries of planners (`forge draft`), oldest first, as rows: the draft's
    name is the plan, its task `draft`, and a sound answer counts as landed."""
    path = path_of(state)
    if not path.exists():
        return []
    where, args = _where(("name", plan), since)
    sql = (
        "SELECT name, 'draft', agent, outcome, outcome = 'SOUND', 0, cost_usd, input_tokens, "
        "output_tokens, started, seconds, NULL, 0, prompt_chars, NULL, models, reason FROM drafts"
        + where
        + " ORDER BY started"
    )
    return [_row(r) for r in _select(path, sql, args)]


def _where(column: tuple[str, str | None], since: float | None) -> tuple[str, list[str | float]]:
    where: list[str] = []
    args: list[str | float] = []
    if column[1] is not None:
        where.append(f"{column[0]} = ?")
        args.append(column[1])
    if since is not None:
        where.append("started >= ?")
        args.append(since)
    return (f" WHERE {' AND '.join(where)}" if where else ""), args


def _select(path: Path, sql: str, args: list[str | float]) -> list[tuple[object, ...]]:
    try:
        con = read_sqlite(path)
        try:
            found: list[tuple[object, ...]] = con.execute(sql, args).fetchall()
            return found
        finally:
            con.close()
    except sqlite3.Error:
        return []  # no history yet (or a table an older forge did not make)


def _row(r: tuple[object, ...]) -> Row:
    return Row(
        plan=str(r[0]),
        task=str(r[1]),
        agent=str(r[2]),
        outcome=str(r[3]),
        landed=bool(r[4]),
        culprit=bool(r[5]),
        cost_usd=_number(r[6]),
        input_tokens=_whole(r[7]),
        output_tokens=_whole(r[8]),
        started=_number(r[9]) or 0.0,
        seconds=_number(r[10]) or 0.0,
        landed_at=_number(r[11]),
        files=_whole(r[12]) or 0,
        prompt_chars=_whole(r[13]) or 0,
        model_mismatch=_text(r[14]),
        models=_text(r[15]),
        reason=_text(r[16]),
    )


# A column's value as its row reads it (None: NULL, or a value of another type).


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
