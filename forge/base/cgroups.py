"""cgroup v2, where it is delegated to us: each long command (a task's agent, setup
or check, a verification lane) gets a cgroup of its own, and stopping it empties the
cgroup with `cgroup.kill`, escapees that left the process group and dropped forge's
environment tag included.

Used only when `/sys/fs/cgroup` is a cgroup v2 hierarchy and the cgroup forge runs
in is writable by it (systemd's `Delegate=yes`, a container given its own
subtree). Elsewhere (cgroup v1, no delegation) `delegated()` says why, and forge
relies on the process group, the environment tag and its orphans (forge/base/procgroup.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

from forge.frozen import frozen

MOUNT = Path("/sys/fs/cgroup")


@functools.cache
def delegated() -> Path | None:
    """The cgroup forge may make children in (None: not here; `why_not` says why)."""
    return _probe(MOUNT)[0]


def why_not() -> str | None:
    return _probe(MOUNT)[1]


def _probe(mount: Path) -> tuple[Path | None, str | None]:
    if not (mount / "cgroup.controllers").exists():
        return None, "no cgroup v2 hierarchy at /sys/fs/cgroup"
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return None, f"cannot read /proc/self/cgroup: {exc}"
    own = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
    if own is None:
        return None, "this process is in no cgroup v2 cgroup"
    here = mount / own.lstrip("/")
    if not (here / "cgroup.kill").exists():
        return None, "the kernel has no cgroup.kill (Linux 5.14 or newer needed)"
    probe = here / f"forge-probe-{os.getpid()}-{os.urandom(2).hex()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return None, f"the cgroup {here} is not delegated to this user ({exc.strerror})"
    return here, None


@frozen
class Group:
    path: Path

    @classmethod
    def make(cls, parent: Path, name: str) -> Group:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80]
        path = parent / f"forge-{os.getpid()}-{safe}-{os.urandom(3).hex()}"
        path.mkdir()
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started inside the cgroup: the shell moves itself in, then execs, so
        nothing the command starts is ever outside it."""
        procs = self.path / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *argv]

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split() if p.isdigit()]

    def kill(self, *, wait: float = 5.0) -> None:
        """KILL everything in the cgroup and wait until it is empty."""
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + wait
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.02)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


def for_command(tag: str | None) -> Group | None:
    """A cgroup of its own for one command, where cgroup v2 is delegated (else None)."""
    parent = delegated()
    if parent is None:
        return None
    try:
        return Group.make(parent, tag or "command")
    except OSError:
        return None  # a full or read-only hierarchy: the process group still applies


def empty(group: Group, log: Callable[[str], None]) -> None:
    """Kill what the command left in its cgroup, said in its log."""
    left = group.pids()
    if left:
        log(f"forge: killed {len(left)} process(es) left in the command's cgroup")
        group.kill()
