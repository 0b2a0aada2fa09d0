"""Is that forge process still alive? A pid alone lies (pids are reused), so every
record of a live process carries the pid and the process's start time, read from
/proc, and both must match."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict

from forge.base.shape import as_int
from forge.frozen import frozen


@frozen
class ProcStat:
    pid: int
    state: str  # R, S, D, Z (zombie), T, ...
    ppid: int
    pgid: int
    start: int  # clock ticks since boot: with the pid, names one process for good

    @property
    def zombie(self) -> bool:
        return self.state == "Z"


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat line, or None when it is gone (or unreadable)."""
    raw = read_proc(f"/proc/{pid}/stat").decode("utf-8", "replace")
    if not raw:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    end = raw.rfind(")")
    fields = raw[end + 2 :].split()
    if end < 0 or len(fields) < 20:
        return None
    return ProcStat(
        pid=pid, state=fields[0], ppid=int(fields[1]), pgid=int(fields[2]), start=int(fields[19])
    )


def read_proc(path: str) -> bytes:
    """A /proc file's content (b"": gone or unreadable); plain os calls, as this runs
    for every process on the machine each time a command ends."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it is gone."""
    stat = read_stat(pid)
    if stat is None or stat.zombie:  # a zombie has finished; only its exit status is left
        return None
    return stat.start


@frozen
class Owner:
    """Who holds something: a process named by pid, start time and host."""

    pid: int
    start: int | None
    host: str
    command: str = ""

    @classmethod
    def me(cls, command: str = "") -> Owner:
        pid = os.getpid()
        return cls(pid=pid, start=start_time(pid), host=os.uname().nodename, command=command)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Owner:
        return cls(
            pid=as_int(data["pid"]),
            start=None if data.get("start") is None else as_int(data["start"]),
            host=str(data.get("host", "")),
            command=str(data.get("command", "")),
        )

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def alive(self) -> bool:
        """True when this very process still runs (same pid *and* same start time).

        A record from another host cannot be checked and counts as alive (fail closed).
        """
        if self.host and self.host != os.uname().nodename:
            return True
        now = start_time(self.pid)
        if now is None:
            return False
        return self.start is None or now == self.start

    def describe(self) -> str:
        what = f" ({self.command})" if self.command else ""
        return f"pid {self.pid}{what} on {self.host}"
