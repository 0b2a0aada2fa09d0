"""Short commands: the one door to subprocesses that run to completion.

Git plumbing and other short commands go through `run`; long ones (agents,
checks, verification lanes) run in a process group of their own
(forge/base/procgroup.py), so they can be stopped as a whole.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from forge.errors import ForgeError
from forge.frozen import frozen

# Variables a parent git (a hook, `git rebase -x`) leaks into its children; left
# in place they would point every git call of ours at the wrong repository.
_GIT_LEAKS = (
    "GIT_DIR",
    "GIT_INDEX_FILE",
    "GIT_WORK_TREE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_QUARANTINE_PATH",
)


# The code host's tokens: they push, open pull requests and read private
# repositories as the person. No task, check or lane is handed one.
HOST_TOKENS = (
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "GL_TOKEN",
    "GITEA_TOKEN",
    "BITBUCKET_TOKEN",
)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LEAKS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    if extra:
        env.update(extra)
    return env


def command_env(extra: Mapping[str, str] | None, *, tokens: bool = False) -> dict[str, str]:
    """A long command's whole environment (a task's, a check's, a lane's): the
    cleaned one with `extra` on top, and none of the code host's tokens unless
    `tokens` (the person's own notify command)."""
    env = clean_env(extra)
    if not tokens:
        for name in HOST_TOKENS:
            env.pop(name, None)
    return env


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


class CommandError(ForgeError):
    """A short command failed: says argv, cwd, exit code and the output's tail."""

    def __init__(self, argv: Sequence[str], cwd: Path, returncode: int, output: str) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.returncode = returncode
        self.output = output
        last = tail(output, 1) or "(no output)"
        super().__init__(f"`{' '.join(self.argv)}` in {cwd} exited {returncode}: {last}")


@frozen
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


class Stopped(ForgeError):
    """A command given a `stop` event was killed because the event was set."""


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
    stop: threading.Event | None = None,
) -> Completed:
    """Run a short command to completion and capture its output. `stop`: a long one
    (a checkout of a large tree) is killed when this event is set (`Stopped`)."""
    if not cwd.is_absolute():
        raise ValueError(f"cwd must be absolute: {cwd}")
    what = f"`{' '.join(argv[:3])} ...` in {cwd}"
    if stop is not None and stop.is_set():
        raise Stopped(f"{what} was stopped before it started")
    try:
        child = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=clean_env(env),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # File names are bytes: a name that is not UTF-8 survives the round trip
            # (os functions take it back as it was) instead of stopping forge.
            encoding="utf-8",
            errors="surrogateescape",
        )
    except FileNotFoundError as exc:
        raise ForgeError(f"cannot run `{argv[0]}`: not found on PATH") from exc
    with child:
        try:
            while True:
                # With `stop`, looked at every 50 ms (a retried communicate loses no output).
                try:
                    out, err = child.communicate(input, timeout=None if stop is None else _POLL)
                    break
                except subprocess.TimeoutExpired:
                    if stop is not None and stop.is_set():
                        raise Stopped(f"{what} was stopped") from None
        except BaseException:  # stopped, or Ctrl-C: nothing of it left running
            child.kill()
            raise
    if check and child.returncode != 0:
        raise CommandError(argv, cwd, child.returncode, (err or "") + (out or ""))
    return Completed(list(argv), child.returncode, out, err)


_POLL = 0.05  # seconds between looks at a `stop` event


def spawn_detached(
    argv: Sequence[str], *, cwd: Path, log_path: Path, env: Mapping[str, str] | None = None
) -> int:
    """Start a background process that outlives us: a session of its own (no
    terminal, so no SIGINT/SIGHUP from it), stdin from /dev/null, output to a log."""
    if not cwd.is_absolute():
        raise ValueError(f"cwd must be absolute: {cwd}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as out:
        child = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=clean_env(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return child.pid


def passthrough(argv: Sequence[str], *, cwd: Path, input: bytes | None = None) -> int:
    """Run a command on our own terminal with our environment exactly as it is, and
    return its exit code: for a user's git hook that forge chains, which expects
    what git gave forge (GIT_DIR included) and speaks to the user directly."""
    if not cwd.is_absolute():
        raise ValueError(f"cwd must be absolute: {cwd}")
    try:
        cp = subprocess.run(
            list(argv),
            cwd=cwd,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except OSError as exc:
        raise ForgeError(f"cannot run `{argv[0]}`: {exc.strerror or exc}") from exc
    return cp.returncode


# A shell command as the argv that runs it: `bash -c COMMAND`, or for a long one
# `bash FILE`. Linux caps one argument at 128 KiB (MAX_ARG_STRLEN), so a plan's 5 MB
# `run` would not start at all under `bash -c`.
ARG_LIMIT = 100_000  # bytes of a command passed as one argument (the cap is 131072)
SCRIPT = "forge-command.sh"


def shell_args(
    command: str, *, stack: contextlib.ExitStack, folder: Path | None = None, seen_as: str = ""
) -> list[str]:
    """The argv that runs `command`. A long one goes into `folder` (a temp folder of
    the command's own, seen by the command as `seen_as`: a sandbox's /tmp), or into
    a temp folder made here and removed when `stack` closes."""
    data = command.encode("utf-8", "surrogateescape")
    if len(data) <= ARG_LIMIT:
        return ["bash", "-c", command]
    if folder is None:
        folder = private_tmp("command")
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        seen_as = ""
    path = folder / SCRIPT
    path.write_bytes(data)
    return ["bash", f"{seen_as}/{SCRIPT}" if seen_as else str(path)]


# A command's own temp folder (a sandbox's /tmp, a long command's script) names the
# forge process that made it, so that one a `kill -9` left is removed by the next.
_PRIVATE = re.compile(r"^forge-(?:sandbox|command)-(\d+)-")


def private_tmp(kind: str) -> Path:
    """A new temp folder of forge process's own (`kind`: "sandbox" or "command")."""
    return Path(tempfile.mkdtemp(prefix=f"forge-{kind}-{os.getpid()}-"))


def sweep_private_tmp(where: Path | None = None) -> list[Path]:
    """Remove the private temp folders whose forge process is gone (only ours: the
    same user's). Returns what was removed."""
    root = Path(where or tempfile.gettempdir())
    gone: list[Path] = []
    try:
        names = os.listdir(root)
    except OSError:
        return gone
    for name in names:
        m = _PRIVATE.match(name)
        if m is None or pid_alive(int(m.group(1))):
            continue
        path = root / name
        try:
            if path.is_symlink() or path.lstat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        gone.append(path)
    return gone


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: not ours to judge
    return True
