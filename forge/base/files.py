"""forge's files on disk, under the repository's git common directory.

Every write is atomic (a temp file in the same folder, fsync, `os.replace`), so a
`kill -9` leaves either the old file or the new one, never half of one. A file
that cannot be read is named with how to recover, and is never overwritten.

Layout (``<common>`` is ``git rev-parse --git-common-dir``)::

    <common>/forge/hold.json                     repository-wide hold
    <common>/forge/plans/<plan>/plan.json        the recorded plan (forge plan)
    <common>/forge/plans/<plan>/state.json       task statuses, attempts, verification
    <common>/forge/plans/<plan>/run.lock         held by the one process running the plan
    <common>/forge/plans/<plan>/owner.json       who holds run.lock (pid + start time)
    <common>/forge/plans/<plan>/hold.json        a hold on this plan only
    <common>/forge/plans/<plan>/logs/...         agent, check, setup, merge logs
    <common>/forge/verify/...                    verification records and verdict cache
    <common>/forge/private/history.sqlite        every attempt and test run, a person's
                                                 words (SQLite), out of every command's sight

forge's SQLite files are opened one way (`connect_sqlite`): runs of different plans
and verifications write at once, so WAL mode (kept in the file once set: any SQLite
tool reads it meanwhile) and a busy timeout serialise them; a row a crash of the
machine (not of forge) loses is a row of history, not of state, so no flush to the
disk at every write (each one cost ~4 ms).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from forge.base.liveness import Owner, start_time
from forge.frozen import frozen

if TYPE_CHECKING:
    import sqlite3
from forge.errors import Busy, ExitCode, ForgeError, StateError

# A JSON object as forge reads it from a file or writes it (a record's `from_dict`
# and `to_dict`, the CLI's --json): the edge where typed records are parsed and
# written, and the only place their fields are looked up by key.
JsonObject = dict[str, Any]

SCHEMA_VERSION = 1
TEMP_SUFFIX = ".tmp"


def sweep_temp_files(directory: Path) -> list[Path]:
    """Remove the temp files of atomic writes whose writer is gone (a `kill -9`
    between the temp file and its rename). A temp file of a live writer stays.
    Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
            continue
        pid = _writer_pid(name)
        if pid is None or pid == os.getpid() or start_time(pid) is not None:
            continue
        with contextlib.suppress(FileNotFoundError):
            entry.unlink()
            removed.append(entry)
    return removed


def _writer_pid(name: str) -> int | None:
    """`.state.json.1234.ab_c9.tmp` -> 1234; None for a name no atomic write made."""
    parts = name[: -len(TEMP_SUFFIX)].split(".")
    # ["", "state", "json", "1234", "ab_c9"]: the pid is the part before the random one
    if len(parts) < 4 or not parts[-2].isdigit():
        return None
    return int(parts[-2])


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never
    half of one. The rename alone makes this safe against a killed writer; `durable`
    also fsyncs, so the file survives a power cut (run state skips it: it is written
    several times per task, and a crash of the machine is not what it guards against)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The writer's pid is in the name, so a temp file left by a killed writer can be
    # told from one being written right now (sweep_temp_files).
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=path.parent
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, data: object, *, compact: bool = False) -> None:
    if compact:  # hot path (run state): no indentation, no fsync
        atomic_write_text(path, json.dumps(data, separators=(",", ":")) + "\n", durable=False)
    else:
        atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path, *, what: str = "state file") -> JsonObject:
    """Read a JSON file forge wrote; a corrupt one is a StateError naming it.

    forge writes only objects, so that is what a reader is given. A file changed
    into another JSON value is returned as it is: a reader that names a wrong shape
    checks for one (`isinstance`, `shape.problem`), the others fail on it as on a
    missing key."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StateError(f"cannot read {what} {path}: {exc.strerror}") from exc
    try:
        data: JsonObject = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        # RecursionError: nested deeper than the parser goes (`[[[...]]]`)
        why = (
            f"{exc.msg} at line {exc.lineno}"
            if isinstance(exc, json.JSONDecodeError)
            else "nested too deep"
        )
        raise StateError(
            f"{what} {path} is corrupt ({why}); "
            f"move it aside and run `forge plan` again to start from a fresh record"
        ) from None
    version = data.get("schema_version", SCHEMA_VERSION) if isinstance(data, dict) else None
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise StateError(
            f"{what} {path} has an unexpected shape (schema_version {version!r}); "
            f"move it aside and run `forge plan` again to start from a fresh record"
        )
    if version is not None and version > SCHEMA_VERSION:
        raise StateError(
            f"{what} {path} was written by a newer forge (schema "
            f"{data['schema_version']}); upgrade forge to use it"
        )
    return data


@overload
def read_json_or(path: Path, default: None, *, what: str = ...) -> JsonObject | None: ...
@overload
def read_json_or(path: Path, default: JsonObject, *, what: str = ...) -> JsonObject: ...
def read_json_or(
    path: Path, default: JsonObject | None, *, what: str = "state file"
) -> JsonObject | None:
    """`read_json`, or `default` when there is no such file."""
    try:
        return read_json(path, what=what)
    except FileNotFoundError:
        return default


@frozen
class StateDir:
    """Paths of forge's files for one repository."""

    root: Path  # <common>/forge

    @classmethod
    def for_common_dir(cls, common_dir: Path) -> StateDir:
        return cls(common_dir / "forge")

    @property
    def hold_file(self) -> Path:
        return self.root / "hold.json"

    @property
    def plans_dir(self) -> Path:
        return self.root / "plans"

    @property
    def verify_dir(self) -> Path:
        return self.root / "verify"

    @property
    def private_dir(self) -> Path:
        """forge's records that no command it runs sees (the sandbox and the box
        cover the folder: forge/base/box.py)."""
        return self.root / "private"

    def history_file(self) -> Path:
        """The history (attempts, test runs, a person's words); one an older forge
        kept beside the plans is moved in first."""
        path = self.private_dir / "history.sqlite"
        old = self.root / path.name
        if old.exists() and not path.exists():
            self.private_dir.mkdir(parents=True, exist_ok=True)
            for suffix in ("-wal", "-shm", ""):  # the database last: it is what is looked for
                with contextlib.suppress(FileNotFoundError):
                    os.rename(f"{old}{suffix}", f"{path}{suffix}")
        return path

    def plan_dir(self, plan: str) -> Path:
        return self.plans_dir / plan

    def plan_file(self, plan: str) -> Path:
        return self.plan_dir(plan) / "plan.json"

    def read_plan_record(self, plan: str) -> JsonObject:
        """The recorded plan as `forge plan` wrote it (JSON; its meaning is
        `forge.plan.registry.Recorded`). FileNotFoundError when none is recorded; a
        corrupt one is a StateError naming it."""
        return read_json(self.plan_file(plan), what="recorded plan")

    def state_file(self, plan: str) -> Path:
        return self.plan_dir(plan) / "state.json"

    def plan_hold_file(self, plan: str) -> Path:
        return self.plan_dir(plan) / "hold.json"

    def logs_dir(self, plan: str) -> Path:
        return self.plan_dir(plan) / "logs"

    def recorded_plans(self) -> list[str]:
        if not self.plans_dir.is_dir():
            return []
        return sorted(p.parent.name for p in self.plans_dir.glob("*/plan.json"))


@contextlib.contextmanager
def plan_lock(state: StateDir, plan: str, *, command: str) -> Iterator[Owner]:
    """Hold the plan's run lock for the duration; refuse (Busy, exit 2) when another
    live forge process holds it, naming that process.

    The lock is a kernel `flock` (filelock), so it dies with its holder: a `kill -9`
    never leaves a stale lock. owner.json only tells *who* holds it.
    """
    from filelock import FileLock, Timeout

    pdir = state.plan_dir(plan)
    pdir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(pdir / "run.lock"))
    owner_file = pdir / "owner.json"
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise Busy(f"plan '{plan}' is busy: {_holder(owner_file)}") from None
    me = Owner.me(command)
    # Holding the lock, no other run of this plan is writing: clear what a killed one
    # left half-written (only files whose writer is gone).
    sweep_temp_files(pdir)
    sweep_temp_files(state.root)
    try:
        write_json(owner_file, me.to_dict())
        yield me
    finally:
        with contextlib.suppress(FileNotFoundError):
            owner_file.unlink()
        lock.release()


def _holder(owner_file: Path) -> str:
    """Who holds the lock, as far as owner.json tells, checked for liveness (pid and
    start time): the lock is the truth, owner.json only a name for it."""
    try:
        data = read_json_or(owner_file, None, what="lock owner file")
        owner = Owner.from_dict(data) if isinstance(data, dict) else None
    except (StateError, KeyError, TypeError, ValueError):
        owner = None
    if owner is None:
        return "another forge process holds its lock (it has not said which yet); try again shortly"
    if not owner.alive():
        return (
            f"another forge process holds its lock (the recorded holder, {owner.describe()}, "
            f"is gone); try again shortly"
        )
    return f"{owner.describe()} is running it (wait for it to end, or stop it)"


SQLITE_BUSY_MS = 10_000
_sqlite_ready: set[tuple[Path, str]] = set()  # (file, schema) this process has set up


@contextlib.contextmanager
def connect_sqlite(
    path: Path, schema: str, *, version: int | None = None
) -> Iterator[sqlite3.Connection]:
    """A connection to the SQLite file `path` (made, with its folder, when missing),
    `schema` set up once a process (and `user_version` set to `version`);
    committed on leaving."""
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = (path, schema) not in _sqlite_ready or not path.exists()
    con = sqlite3.connect(path, timeout=SQLITE_BUSY_MS / 1000)
    try:
        con.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}")
        con.execute("PRAGMA synchronous = NORMAL")
        if fresh:
            _set_up_sqlite(con, schema, version)
            _sqlite_ready.add((path, schema))
        yield con
        con.commit()
    finally:
        con.close()


def read_sqlite(path: Path) -> sqlite3.Connection:
    """A connection that only reads the SQLite file `path` (sqlite3.Error when
    there is none)."""
    import sqlite3

    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=SQLITE_BUSY_MS / 1000)


def _set_up_sqlite(con: sqlite3.Connection, schema: str, version: int | None) -> None:
    """WAL (kept in the file once set) and the schema. Switching to WAL answers
    "database is locked" at once, without the busy timeout, while another process
    sets the same new file up: asked again until the timeout."""
    import sqlite3
    import time

    deadline = time.monotonic() + SQLITE_BUSY_MS / 1000
    while True:
        try:
            if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                con.execute("PRAGMA journal_mode = WAL")
            con.executescript(schema)
            if version is not None:
                con.execute(f"PRAGMA user_version = {version}")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# -- a full disk ------------------------------------------------------------------
# A full disk (or a spent quota) is nobody's failure: the run pauses (exit 8), naming
# the folder it could not write and the space left there, and the next run goes on.

_FULL = (errno.ENOSPC, errno.EDQUOT)
# What git and other tools print when a write found no space.
_SAID = ("No space left on device", "Out of diskspace", "Disk quota exceeded")


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in out:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def is_full(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is a write refused for want of space: an
    OSError's number, or a command's output saying so."""
    for seen in _chain(exc):
        if isinstance(seen, OSError) and seen.errno in _FULL:
            return True
        output = getattr(seen, "output", None)  # a command's (proc.CommandError)
        if isinstance(output, str) and any(said in output for said in _SAID):
            return True
    return False


class DiskFull(ForgeError):
    """The pause a full disk makes: one line, exit 8."""

    def __init__(
        self, exc: BaseException, *, resume: str = "the same command", where: Path | None = None
    ) -> None:
        where = _full_where(exc) or where
        free = _free_in(where) if where is not None else None
        place = f" in {where}" if where is not None else ""
        left = f" ({_bytes(free)} free there)" if free is not None else ""
        super().__init__(
            f"paused: no space left on the device{place}{left}: free some space "
            f"(a few hundred MB), then run {resume} again; it goes on where it stopped",
            code=ExitCode.PAUSED,
        )


def _full_where(exc: BaseException) -> Path | None:
    """The folder the refused write was for: the file's, or the command's."""
    for seen in _chain(exc):
        if isinstance(seen, OSError) and seen.filename:
            path = Path(os.fsdecode(seen.filename))
            return path if path.is_dir() else path.parent
        cwd = getattr(seen, "cwd", None)  # the folder of a command that failed
        if isinstance(cwd, Path):
            return cwd
    return None


def _free_in(where: Path) -> int | None:
    for folder in (where, *where.parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KB", "MB"):
        if value < 1024:
            return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
