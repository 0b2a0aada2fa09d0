"""The box: what keeps a command in, with or without the sandbox: its processes
(nothing it starts outlives it) and forge's records (out of its sight).

**Namespaces.** Without the sandbox (forge/base/sandbox.py), a task's commands, its
check, the planner and a verification lane run under `unshare`: a pid namespace of their own
with a fresh /proc, and a private mount namespace in which /dev/null covers forge's
key (forge/base/seal.py; its folder holds the agents' per-task state, which a task
uses) and an empty tmpfs the repository's private folder (the history: attempts,
test runs, a person's words). As root that is all; as anyone
else the namespaces are made in a user namespace, and the command runs in one more,
as its own user again and without any capability, so that it cannot unmount what
covers the records (those mounts are locked). The box's pid 1 is a bash script
(`_SETUP`, then `_WAITER`): it makes the mounts, runs the command, and when the
command exits names the processes it left (into a file forge reads), sends them
TERM, waits up to the grace and exits: the kernel KILLs whatever is left in the
namespace. A pid it names is the namespace's, as the command saw it (`$$`). pid 1
of a namespace gets no signal it has no handler for, so forge's TERM to the
process group reaches the command, not it; and a box costs ~30 ms a command.

Where no namespace can be made (`unavailable` says why; FORGE_BOX=off acts as if,
for tests), forge relies on the process group, its tag and its orphans
(forge/base/procgroup.py, forge being the child subreaper), and a task can read
forge's records: both are limits `forge doctor` names.

**cgroup v2**, where it is delegated to us: each long command (a task's agent, setup
or check, a verification lane) gets a cgroup of its own, and stopping it empties the
cgroup with `cgroup.kill`, escapees that left the process group and dropped forge's
environment tag included. Used only when `/sys/fs/cgroup` is a cgroup v2 hierarchy
and the cgroup forge runs in is writable by it (systemd's `Delegate=yes`, a container
given its own subtree). Elsewhere (cgroup v1, no delegation) `why_not` says why.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from forge.base import seal
from forge.frozen import frozen

MOUNT = Path("/sys/fs/cgroup")
_PR_SET_CHILD_SUBREAPER = 36


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


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (not to init), so their
    zombies can be reaped here and a stopped group really empties. Linux only."""
    try:
        import ctypes  # only here: importing it costs ~10 ms on every command

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


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


# -- namespaces --------------------------------------------------------------

BOX_VAR = "FORGE_BOX"  # "off": run as where no namespace can be made (a test switch)
_LEFT = "left "  # a report line: `left NAME (pid N)`
_STEP = 0.05  # seconds between pid 1's looks at what is left
# pid 1 first: cover each folder (an empty tmpfs) or file (/dev/null) up to `--`; then, unless root, become the user
# again in one more user namespace (no capability there: the mounts are locked),
# and exec the waiter (still pid 1).
_SETUP = r"""w=$1 r=$2 n=$3 who=$4 m=$5 u=$6; shift 6
while [ "$1" != -- ]; do
  if [ -d "$1" ]; then "$m" -t tmpfs -o size=64k,mode=0755,nosuid,nodev forge-box "$1"
  else "$m" --bind /dev/null "$1"; fi || exit 125
  shift
done
shift
[ -z "$who" ] && exec "$0" -c "$w" sh "$r" "$n" "$@"
exec "$u" --user --map-user="${who%:*}" --map-group="${who#*:}" --mount -- \
  "$0" -c "$w" sh "$r" "$n" "$@"
"""
# pid 1 then runs the command (the report's descriptor closed for it), waits for
# it, names what it left on the report, TERMs that, waits up to `n`
# steps, and exits with the command's status: the kernel KILLs what is left. pid 1
# has no handler: the signals forge sends the group reach the command, not it.
_WAITER = r"""r=$1 n=$2; shift 2
eval "\"\$@\" $r>&-"
s=$?
left() {
  o=
  for d in /proc/[1-9]*; do
    p=${d#/proc/}; [ "$p" = 1 ] && continue
    read -r l 2>/dev/null <"$d/stat" || continue
    l=${l##*) }; [ "${l%% *}" = Z ] || o="$o $p"
  done
}
left
[ -z "$o" ] && exit "$s"
for p in $o; do
  read -r m 2>/dev/null <"/proc/$p/comm" && eval "printf 'left %s (pid %s)\n' \"\$m\" $p >&$r"
  kill -TERM "$p" 2>/dev/null; kill -CONT "$p" 2>/dev/null
done
i=0
while [ "$i" -lt "$n" ]; do left; [ -z "$o" ] && break; sleep 0.05; i=$((i + 1)); done
exit "$s"
"""


def _wanted() -> bool:
    return os.environ.get(BOX_VAR, "").strip().lower() not in ("0", "off", "false", "no")


@functools.cache
def _tools() -> tuple[str, str, str]:
    """Where `unshare`, `bash` and `mount` are ("": not found). bash, not sh: the
    report's descriptor may have two digits."""
    unshare, bash, mount = (shutil.which(name) or "" for name in ("unshare", "bash", "mount"))
    return unshare, bash, mount


def made(hide: Sequence[Path]) -> list[Path]:
    """The folders `hide`, made where missing, and forge's key, made on first use:
    what is made only while a command runs would not be covered in its namespace."""
    seal.key()
    for folder in hide:
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return list(hide)


def wrap(argv: Sequence[str], *, hide: Sequence[Path], report: int, grace: float) -> list[str]:
    """`argv` run in a box whose pid 1 covers forge's key (the file: its folder holds
    the agents' per-task state) and each folder of `hide` (made when missing, so that
    one made later is covered too), and writes to the file descriptor `report` what
    the command left (`read_report`)."""
    made(hide)
    key = seal.key_dir() / "key"
    covered = [key, *hide] if key.is_file() else list(hide)
    unshare, bash, mount = _tools()
    args = [unshare, "--pid", "--fork", "--mount", "--propagation", "private", "--mount-proc"]
    who = ""
    if os.geteuid() != 0:
        args[1:1] = ["--user", "--map-root-user"]
        who = f"{os.getuid()}:{os.getgid()}"
    steps = str(max(0, round(grace / _STEP)))
    pid1 = [bash, "-c", _SETUP, bash, _WAITER, str(report), steps, who, mount, unshare]
    return [*args, "--", *pid1, *map(str, covered), "--", *argv]


@contextlib.contextmanager
def report_file() -> Iterator[int]:
    """A file of no name for a box's pid 1 to write its report into."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="forge-box-")
    os.unlink(path)
    try:
        yield fd
    finally:
        os.close(fd)


def read_report(fd: int) -> tuple[str, ...]:
    """What the command left, as pid 1 named it in the file `fd`: `name (pid N)`,
    the pid the namespace's."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    lines = b"".join(chunks).decode("utf-8", "replace").splitlines()
    return tuple(line[len(_LEFT) :] for line in lines if line.startswith(_LEFT))


@functools.cache
def _namespaces() -> str | None:
    """Why no box can be made here (None: one can), found by running `true` in one."""
    missing = [
        name for name, at in zip(("unshare", "bash", "mount"), _tools(), strict=True) if not at
    ]
    if missing:
        return f"no {', '.join(missing)} here (util-linux)"
    with report_file() as fd:
        try:
            cp = subprocess.run(
                wrap(["true"], hide=(), report=fd, grace=0),
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
                cwd="/",
                pass_fds=(fd,),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`unshare` cannot run here ({exc})"
    if cp.returncode == 0:
        return None
    last = (cp.stderr.strip().splitlines() or ["no reason given"])[-1]
    return f"no pid and mount namespace can be made here: {last}"


def unavailable() -> str | None:
    """Why commands outside the sandbox run without a box (None: they run in one)."""
    if not _wanted():
        return f"{BOX_VAR}={os.environ[BOX_VAR]} says so"
    return _namespaces()
