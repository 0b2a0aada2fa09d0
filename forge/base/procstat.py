"""`/proc/<pid>/stat`, read in one place (liveness and process groups both need it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
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
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    end = raw.rfind(")")
    fields = raw[end + 2 :].split()
    if end < 0 or len(fields) < 20:
        return None
    return ProcStat(
        pid=pid, state=fields[0], ppid=int(fields[1]), pgid=int(fields[2]), start=int(fields[19])
    )
