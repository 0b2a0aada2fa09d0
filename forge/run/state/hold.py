"""Holds: a file that stops new dispatches, repository-wide or for one plan.

It lives on disk, so it survives restarts. A hold file that cannot be read counts
as a hold (fail closed). Removing a hold compares before it removes, so a newer
hold set in between survives.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from forge.base.clock import now_iso
from forge.base.files import StateDir, atomic_write_text
from forge.base.liveness import Owner
from forge.errors import ForgeError
from forge.frozen import frozen


@frozen
class Hold:
    path: Path
    reason: str
    since: str
    owner: Owner | None
    scope: str  # "repository" or "plan '<name>'"
    by: str = ""  # who set it (user name)
    unreadable: str | None = None  # why the file could not be read (fail closed)

    @property
    def resume(self) -> str:
        """The command that lifts this hold."""
        plan = self.scope.removeprefix("plan ").strip("'")
        return "forge resume" if self.scope == "repository" else f"forge resume --plan {plan}"

    def describe(self) -> str:
        if self.unreadable:
            return (
                f"hold file {self.path} cannot be read ({self.unreadable}); it counts as a hold: "
                f"fix it or delete it, or run `{self.resume}`"
            )
        who = (
            f" by {self.owner.describe()}" if self.owner else (f" by {self.by}" if self.by else "")
        )
        dead = " (that process has died)" if self.owner and not self.owner.alive() else ""
        return f"{self.scope} held since {self.since}{who}{dead}: {self.reason}"


def _path(state: StateDir, plan: str | None) -> Path:
    return state.hold_file if plan is None else state.plan_hold_file(plan)


def read(state: StateDir, plan: str | None) -> Hold | None:
    path = _path(state, plan)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unreadable(path, plan, exc.strerror or str(exc))
    return _parse(path, plan, raw)


def _scope(plan: str | None) -> str:
    return "repository" if plan is None else f"plan '{plan}'"


def _unreadable(path: Path, plan: str | None, why: str) -> Hold:
    return Hold(path, "", "", None, _scope(plan), unreadable=why)


def _parse(path: Path, plan: str | None, raw: bytes) -> Hold:
    try:
        data: object = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise TypeError(f"{type(data).__name__}, not an object")
        owner = Owner.from_dict(data["owner"]) if data.get("owner") else None
        return Hold(
            path,
            str(data["reason"]),
            str(data.get("since", "")),
            owner,
            _scope(plan),
            str(data.get("by", "")),
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        return _unreadable(path, plan, f"not a valid hold record: {exc}")


def active(state: StateDir, plan: str) -> Hold | None:
    """The hold in force for `plan`: the repository-wide one first."""
    return read(state, None) or read(state, plan)


def set_hold(
    state: StateDir,
    plan: str | None,
    *,
    reason: str,
    owner: Owner | None = None,
    source: str | None = None,
) -> Hold:
    """`source`: where the hold was asked for besides the command line (`web`)."""
    if not reason.strip():
        raise ForgeError("a hold needs a reason: forge hold --reason 'why'")
    path = _path(state, plan)
    by = _user() + (f" ({source})" if source else "")
    data: dict[str, object] = {"reason": reason, "since": now_iso(), "by": by}
    if owner is not None:  # a hold a forge process takes for its own duration
        data["owner"] = owner.to_dict()
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")
    hold = read(state, plan)
    assert hold is not None
    return hold


def digest(path: Path) -> str | None:
    """What identifies one hold file's content; None when there is no file. A file
    that cannot be read is identified by what it is (a folder, say), so even it can
    be compared before it is removed."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        return f"unreadable:{st.st_mode}:{st.st_ino}:{st.st_mtime_ns}"


def release(state: StateDir, plan: str | None, *, expected: str | None = None) -> Hold | None:
    """Remove the hold, but only if the file is still the one we read (compare before
    remove); returns the hold removed, None if there was none.

    `expected` is the digest of the hold the caller decided to remove (it read and
    showed it earlier); without it, the hold read here is the one removed.
    """
    path = _path(state, plan)
    want = digest(path) if expected is None else expected
    before = read(state, plan)
    if before is None or want is None:
        return None
    if digest(path) != want:
        raise ForgeError(
            f"the hold at {path} changed since it was read; it stays (run `forge resume` again)"
        )
    # Rename first, then compare: the rename is atomic, so a hold written after our
    # read is never removed by us.
    grabbed = path.with_name(f".{path.name}.{os.getpid()}.release")
    try:
        os.replace(path, grabbed)
    except FileNotFoundError:
        return None
    if digest(grabbed) != want:
        if not path.exists():  # put the newer hold back
            os.replace(grabbed, path)
        else:  # an even newer hold is in place: it supersedes the one we took
            _discard(grabbed)
        raise ForgeError(f"the hold at {path} changed while it was being removed; it stays")
    _discard(grabbed)
    return before


def _discard(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"
