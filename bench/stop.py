"""stop: SIGINT to `forge verify` and to `forge run` while their verification has
TERM-ignoring grandchildren, with a grace of 1 s. Prints the time from the signal
to forge's exit, against the bound grace + 1 s, and the processes left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import repogen
from kit import Context, Figure, forge, forge_argv, secs

from plans import BenchPlan, edit_tasks

GRACE = 1.0
STUBBORN = Path(__file__).resolve().parent / "stubborn.py"


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_for(cond: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def interrupt(repo: Path, argv: list[str], pidfile: Path) -> tuple[float, int, int]:
    """Start forge, wait until the stubborn verification runs, SIGINT forge.
    Returns (seconds from the signal to forge's exit, exit code, processes left)."""
    p = subprocess.Popen(
        argv,
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: list[int] = []
    try:
        wait_for(
            lambda: pidfile.exists() or p.poll() is not None,
            timeout=120,
            what="the verification to start",
        )
        if p.poll() is not None:
            out, err = p.communicate()
            raise RuntimeError(f"forge exited {p.returncode} before the signal:\n{out}\n{err}")
        pids = [int(x) for x in pidfile.read_text().split()]
        t0 = time.perf_counter()
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)
        took = time.perf_counter() - t0
        left = [pid for pid in pids if alive(pid)]
        return took, p.returncode, len(left)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for pid in pids:  # what forge left behind must not outlive the bench
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def figure(kind: str, took: float, code: int, left: int) -> list[Figure]:
    bound = GRACE + 1.0
    return [
        Figure(
            bench="stop",
            config=f"SIGINT to `forge {kind}`, grace {GRACE:g} s",
            forge=f"{secs(took)} to exit (code {code})",
            alternative=f"{secs(bound)} (grace + 1 s)",
            ratio=took / bound,
            target=1.0,
        ),
        Figure(
            bench="stop",
            config=f"processes left by `forge {kind}`",
            forge=f"{left} of 4",
            alternative="0",
            ratio=float(left),
            target=0.0,
        ),
    ]


def run(ctx: Context) -> list[Figure]:
    work = ctx.tmp("stop")
    repo = repogen.generate(work / "repo", 100)
    figures = []

    cmd = f"{sys.executable} {STUBBORN} {work / 'verify.pids'}"
    (repo / "forge.toml").write_text(
        f"[verify]\ncommand = {json.dumps(cmd)}\ngrace = {GRACE:g}\nreruns = 0\n"
    )
    took, code, left = interrupt(repo, forge_argv("verify"), work / "verify.pids")
    ctx.log(f"  forge verify: exit {code} {secs(took)} after SIGINT, {left} process(es) left")
    figures += figure("verify", took, code, left)

    run_cmd = f"{sys.executable} {STUBBORN} {work / 'run.pids'}"
    plan = BenchPlan(
        name="stop",
        tasks=edit_tasks(1, [repogen.file_path(1)]),
        extra={
            "verify": f"{{ command = {json.dumps(run_cmd)}, grace = {GRACE:g} }}",
            "verify_reruns": "0",
        },
    )
    forge(repo, "plan", str(plan.write(work)))
    took, code, left = interrupt(repo, forge_argv("run", "stop"), work / "run.pids")
    ctx.log(f"  forge run: exit {code} {secs(took)} after SIGINT, {left} process(es) left")
    figures += figure("run", took, code, left)
    return figures
