"""Long commands in a process group of their own, and stopping them as a whole.

Agents, checks and verification lanes run in a process group (a session) of their
own, so stopping one stops everything it started: TERM to the whole group, a grace
period, KILL, and a wait until every member is really gone. A process that escaped
its group with setsid is still found by the tag forge put in its environment.
Members are read from `/proc/<pid>/stat` (liveness reads it here too).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from subprocess import Popen
from typing import IO

from forge.base import box, proc
from forge.base.liveness import ProcStat, read_proc, read_stat
from forge.base.logs import Drain, append_line, log_cap
from forge.base.sandbox import WRAPPERS, Sandbox
from forge.base.settings import DEFAULT_GRACE
from forge.frozen import frozen

TAG_VAR = "FORGE_PROC_TAG"
_POLL = 0.02  # seconds between liveness checks while waiting
_KILL_PATIENCE = 60.0  # how long to keep re-sending KILL before giving up loudly
_DRAIN_PATIENCE = 5.0  # how long to wait for the last output once the group is gone

# Pids whose exit status belongs to a Popen object in some thread: reaping them here
# would make that Popen report exit code 0 for a process that was killed.
_popen_pids: set[int] = set()
_popen_lock = threading.Lock()


@frozen
class GroupSpec:
    """A long command to run in a process group of its own, and how to stop it."""

    argv: Sequence[str] | str  # a string runs under `bash -c`
    cwd: Path  # absolute
    log_path: Path  # output is appended here
    env: Mapping[str, str] | None = None  # on top of the cleaned environment
    timeout: float | None = None
    grace: float = DEFAULT_GRACE  # seconds between TERM and KILL
    tag: str | None = None  # FORGE_PROC_TAG: finds the group's escapees, even after a crash
    input_path: Path | None = None  # stdin (default: /dev/null)
    cap: int | None = None  # bytes of output kept in the log (None: `log_cap()`)
    sandbox: Sandbox | None = None  # run under bubblewrap (forge/base/sandbox.py)
    pass_fds: tuple[int, ...] = ()  # file descriptors the command inherits
    tokens: bool = False  # the code host's tokens reach it (only the person's notify)
    enter: tuple[str, ...] = ()  # what it runs under: a layered checkout's namespace
    # forge's folders hidden from the command (and its key): outside the sandbox, it
    # runs in a box (forge/base/box.py). None: as it is (a person's notify command).
    hide: tuple[Path, ...] | None = None

    def log(self, line: str) -> None:
        append_line(self.log_path, line)


@frozen
class GroupResult:
    returncode: int | None  # the leader's exit code (negative: killed by that signal)
    timed_out: bool
    stopped: bool  # the `stop` event asked for it
    duration: float
    pgid: int  # 0 when the command could not be started at all
    last_output: float | None = None  # when the command last wrote (epoch seconds)
    left: tuple[str, ...] = ()  # `name (pid N)` of each process it left running, stopped


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _all_stats() -> list[ProcStat]:
    """The stat of every process, read once for the several questions asked of them."""
    return [info for pid in _all_pids() if (info := read_stat(pid)) is not None]


def _members(pgid: int, stats: Sequence[ProcStat] | None = None) -> list[ProcStat]:
    """Every process of the group, zombies included."""
    return [info for info in (_all_stats() if stats is None else stats) if info.pgid == pgid]


def _reap(procs: Sequence[ProcStat]) -> None:
    """Collect zombies that are our own children (a subreaper inherits orphans), one
    pid at a time: waitpid(-1) would steal the exit status of other threads' children."""
    me = os.getpid()
    with _popen_lock:
        owned = set(_popen_pids)
    for p in procs:
        if p.state == "Z" and p.ppid == me and p.pid not in owned:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(p.pid, os.WNOHANG)


def _alive(procs: Sequence[ProcStat]) -> list[int]:
    return [p.pid for p in procs if p.state != "Z"]


def group_alive(pgid: int) -> bool:
    """True while any member of the group is running. Decided from /proc rather than
    killpg(pgid, 0), which also answers for a group of unreaped zombies."""
    if pgid <= 0:
        return False
    members = _members(pgid)
    _reap(members)
    return bool(_alive(members))


def _environ_has(pid: int, needle: bytes) -> bool:
    return needle in read_proc(f"/proc/{pid}/environ").split(b"\0")


def find_tagged(tag: str, stats: Sequence[ProcStat] | None = None) -> list[int]:
    """Live processes started with FORGE_PROC_TAG=tag (by any forge process, even one
    that is gone: crash recovery uses this to find what a killed runner left behind)."""
    needle = f"{TAG_VAR}={tag}".encode()
    me = os.getpid()
    return [
        info.pid
        for info in (_all_stats() if stats is None else stats)
        if info.pid != me and not info.zombie and _environ_has(info.pid, needle)
    ]


def _comm(pid: int) -> str:
    return read_proc(f"/proc/{pid}/comm").decode("utf-8", "replace").strip()


def describe(pid: int) -> str:
    """A process as people know it: its command's name and its pid."""
    return f"{_comm(pid) or '?'} (pid {pid})"


def _signal_all(pgid: int, pids: Sequence[int], sig: int) -> None:
    if pgid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def orphans_in(folder: Path, stats: Sequence[ProcStat] | None = None) -> list[int]:
    """Live processes re-parented to us (a subreaper) whose working folder is inside
    `folder`: what a command there left behind after leaving its group and dropping
    its environment (`setsid -f env -i ...`). Only our own orphans, so a user's shell
    that merely looks into the folder is never among them."""
    me = os.getpid()
    with _popen_lock:
        owned = set(_popen_pids)
    inside = str(folder).rstrip("/") + "/"
    found = []
    for info in _all_stats() if stats is None else stats:
        pid = info.pid
        if info.ppid != me or info.zombie or pid in owned:
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if (cwd + "/").startswith(inside):
            found.append(pid)
    return found


def _survivors(
    pgid: int,
    tag: str | None,
    leader: subprocess.Popen[bytes] | None,
    confine: Path | None = None,
) -> list[int]:
    if leader is not None:
        leader.poll()  # reaps the leader through its Popen, which keeps its exit code
    stats = _all_stats()  # one look at /proc for the three questions
    members = _members(pgid, stats) if pgid > 0 else []
    _reap(members)
    alive = set(_alive(members))
    if tag:
        alive.update(find_tagged(tag, stats))
    if confine is not None:
        alive.update(orphans_in(confine, stats))
    if leader is not None and leader.returncode is None:
        alive.add(leader.pid)
    return sorted(alive)


def _term_targets(pgid: int, alive: Sequence[int]) -> tuple[int, list[int]]:
    """Whom TERM goes to: the group and what escaped it; under bubblewrap, whose end
    KILLs its pid namespace at once, each process inside instead (their handlers
    get the grace; bwrap ends when they have)."""
    boxed = [pid for pid in alive if _comm(pid) not in WRAPPERS]
    if boxed and len(boxed) < len(alive):
        return 0, boxed
    return pgid, [pid for pid in alive if (info := read_stat(pid)) and info.pgid != pgid]


def _stop(
    pgid: int,
    *,
    grace: float,
    tag: str | None,
    log: Callable[[str], None],
    leader: subprocess.Popen[bytes] | None = None,
    confine: Path | None = None,
) -> None:
    alive = _survivors(pgid, tag, leader, confine)
    if not alive:
        return
    log(f"forge: sent TERM to group {pgid} ({len(alive)} process(es))")
    target = _term_targets(pgid, alive)
    _signal_all(*target, signal.SIGTERM)
    # A stopped (SIGSTOP) process only acts on TERM once it runs again.
    _signal_all(*target, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        alive = _survivors(pgid, tag, leader, confine)
        if not alive:
            log(f"forge: group {pgid} stopped after TERM")
            return
        time.sleep(_POLL)
    give_up = time.monotonic() + _KILL_PATIENCE
    log(f"forge: sent KILL to group {pgid} ({len(alive)} process(es) still running)")
    while alive:
        escaped = [pid for pid in alive if (info := read_stat(pid)) and info.pgid != pgid]
        _signal_all(pgid, escaped, signal.SIGKILL)
        time.sleep(_POLL)
        alive = _survivors(pgid, tag, leader, confine)
        if alive and time.monotonic() > give_up:
            # Only an uninterruptible (D state) process survives KILL this long.
            log(f"forge: processes {alive} of group {pgid} survive KILL; giving up on them")
            return
    log(f"forge: group {pgid} killed")


def stop_group(
    pgid: int,
    *,
    grace: float,
    tag: str | None = None,
    log: Callable[[str], None] | None = None,
) -> None:
    """TERM the group (and every process tagged `tag`), wait up to `grace` seconds,
    KILL what is left, and return only when all of them are gone."""
    _stop(pgid, grace=grace, tag=tag, log=log or (lambda _line: None))


def run_group(
    spec: GroupSpec,
    *,
    stop: threading.Event | None = None,
    on_start: Callable[[int], None] | None = None,
) -> GroupResult:
    """Run a long command in a process group of its own, output appended to its log
    (at most `spec.cap` bytes of it, see `log_cap`).

    Waits until the leader exits, the timeout passes or `stop` is set; then the group
    is stopped (TERM, grace, KILL), and so is what a leader that exited left: found
    by the group, by `tag` in their environment, as our orphans still working in
    `cwd` (forge is a subreaper) and, where cgroup v2 is delegated, in the command's
    cgroup. A command that cannot start returns 127, the reason in the log. With a
    `sandbox`, the command runs under bubblewrap (forge/base/sandbox.py); else, with
    `hide`, in a box where one can be made (forge/base/box.py).
    """
    if not spec.cwd.is_absolute():
        raise ValueError(f"cwd must be absolute: {spec.cwd}")
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    tag = {TAG_VAR: spec.tag} if spec.tag else {}
    env = proc.command_env({**(spec.env or {}), **tag}, tokens=spec.tokens)
    with contextlib.ExitStack() as outer:
        args = list(spec.argv) if not isinstance(spec.argv, str) else []
        report = None
        if spec.sandbox is not None:
            tmp = proc.private_tmp("sandbox")
            outer.callback(shutil.rmtree, tmp, ignore_errors=True)
            if isinstance(spec.argv, str):
                args = proc.shell_args(spec.argv, stack=outer, folder=tmp, seen_as="/tmp")
            # bwrap starts with `env`; its own network (if any) goes with `outer`
            boxed = replace(spec.sandbox, private=tuple(box.made(spec.hide or ())))
            wrapped = boxed.wrap(args, tmp=tmp, env=env, stack=outer)
            args, env = wrapped.argv, wrapped.env
        else:
            args = proc.shell_args(spec.argv, stack=outer) if isinstance(spec.argv, str) else args
            if spec.hide is not None and box.unavailable() is None:
                report = outer.enter_context(box.report_file())
                args = box.wrap(args, hide=spec.hide, report=report, grace=spec.grace)
                spec = replace(spec, pass_fds=(*spec.pass_fds, report))
        args = [*spec.enter, *args]  # a layered checkout's namespace, around it all
        group = box.for_command(spec.tag)
        if group is not None:
            args = group.wrap(args)
            outer.callback(group.remove)
            outer.callback(box.empty, group, spec.log)  # runs first: escapees of every kind
        result = _run_group(replace(spec, argv=args), env, stop=stop, on_start=on_start)
        return result if report is None else _boxed(spec, result, box.read_report(report))


def _boxed(spec: GroupSpec, result: GroupResult, left: tuple[str, ...]) -> GroupResult:
    """A boxed command's result with the processes it left, as its box's pid 1 named
    (and stopped) them."""
    if not left or result.stopped or result.timed_out:
        return result
    spec.log(f"forge: the command exited but left processes behind: {', '.join(left)}")
    return replace(result, left=(*result.left, *left))


def _run_group(
    spec: GroupSpec,
    env: Mapping[str, str],
    *,
    stop: threading.Event | None,
    on_start: Callable[[int], None] | None,
) -> GroupResult:
    started = time.monotonic()
    spawned = _spawn(spec, env)
    if spawned is None:
        return GroupResult(127, False, False, time.monotonic() - started, 0)
    child, drain = spawned
    drain.start()
    pgid = child.pid  # a session leader's pgid is its pid
    try:
        if on_start is not None:
            on_start(pgid)
        timed_out, stopped = _wait(spec, child, started=started, stop=stop)
        # Daemons the leader left behind must not outlive the run.
        left: tuple[str, ...] = ()
        if found := _survivors(pgid, spec.tag, None, spec.cwd):
            # bwrap tearing its namespace down is forge's, not the command's leftover
            named = [p for p in found if spec.sandbox is None or _comm(p) not in WRAPPERS]
            if named and not (stopped or timed_out):
                left = tuple(describe(pid) for pid in named)
                said = f"left processes behind in group {pgid}: {', '.join(left)}"
                spec.log(f"forge: the command exited but {said}")
            _stop(pgid, grace=spec.grace, tag=spec.tag, log=spec.log, confine=spec.cwd)
        result = GroupResult(
            child.returncode, timed_out, stopped, time.monotonic() - started, pgid, left=left
        )
    finally:
        if child.returncode is None:  # on_start raised, or a KeyboardInterrupt
            _stop(
                pgid, grace=spec.grace, tag=spec.tag, log=spec.log, leader=child, confine=spec.cwd
            )
            child.wait()
        with _popen_lock:
            _popen_pids.discard(child.pid)
        # Every writer is gone, so the pipe ends; a process that escaped both the
        # group and the tag may still hold it: its output is not waited for.
        drain.join(timeout=_DRAIN_PATIENCE)
    return replace(result, last_output=drain.last_output)


def _spawn(spec: GroupSpec, env: Mapping[str, str]) -> tuple[Popen[bytes], Drain] | None:
    """Start the leader in a new session with the whole environment `env`, its output
    into a pipe the drain (not yet started) copies to the log; None (and the reason
    in the log) when the command cannot be started at all."""
    args = ["bash", "-c", spec.argv] if isinstance(spec.argv, str) else list(spec.argv)
    read_end, write_end = os.pipe()
    drain = Drain(read_end, spec.log_path, log_cap(spec.cap))
    with contextlib.ExitStack() as stack:
        stack.callback(os.close, write_end)  # the child holds its own copy
        stdin: int | IO[bytes] = subprocess.DEVNULL
        if spec.input_path is not None:
            stdin = stack.enter_context(spec.input_path.open("rb"))
        try:
            # The lock keeps _reap (another thread stopping a group) from taking this
            # child's exit status between the fork and our registering its pid.
            with _popen_lock:
                child = subprocess.Popen(
                    args,
                    cwd=spec.cwd,
                    env=dict(env),
                    stdin=stdin,
                    stdout=write_end,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=spec.pass_fds,
                )
                _popen_pids.add(child.pid)
        except OSError as exc:
            os.close(read_end)
            spec.log(f"forge: cannot run `{args[0]}`: {exc.strerror or exc}")
            return None
    return child, drain


@contextlib.contextmanager
def _exit_watch(pid: int) -> Iterator[select.poll | None]:
    """A poll object that becomes readable when `pid` exits (a pidfd, Linux 5.3+),
    so a command's end is seen at once rather than at the next poll; None where
    there is none (`Popen.wait` with a timeout sleeps in growing steps)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        yield None
        return
    try:
        watch = select.poll()
        watch.register(fd, select.POLLIN)
        yield watch
    finally:
        os.close(fd)


def _wait(
    spec: GroupSpec,
    child: subprocess.Popen[bytes],
    *,
    started: float,
    stop: threading.Event | None,
) -> tuple[bool, bool]:
    """Wait for the leader; stop the group at the timeout or when `stop` is set.
    Returns (timed out, stopped)."""
    with _exit_watch(child.pid) as exited:
        return _wait_for(spec, child, exited, started=started, stop=stop)


def _wait_for(
    spec: GroupSpec,
    child: subprocess.Popen[bytes],
    exited: select.poll | None,
    *,
    started: float,
    stop: threading.Event | None,
) -> tuple[bool, bool]:
    deadline = None if spec.timeout is None else started + spec.timeout
    while True:
        try:
            if exited is None:
                child.wait(timeout=_POLL)
            elif exited.poll(_POLL * 1000):  # woken the moment the leader exits
                child.wait()
            else:
                raise subprocess.TimeoutExpired(spec.argv, _POLL)
            return False, False
        except subprocess.TimeoutExpired:
            pass
        stopped = stop is not None and stop.is_set()
        timed_out = not stopped and deadline is not None and time.monotonic() >= deadline
        if timed_out:
            spec.log(f"forge: timed out after {spec.timeout:g}s")
        if stopped or timed_out:
            _stop(
                child.pid,
                grace=spec.grace,
                tag=spec.tag,
                log=spec.log,
                leader=child,
                confine=spec.cwd,
            )
            child.wait()
            return timed_out, stopped
