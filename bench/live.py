"""live: `forge run` of a plan of trivial shell tasks on a terminal (a
pseudo-terminal, 50 rows, so the live view draws) against the same run with its
output to a pipe (plain lines). The live view's redraw must not grow with the plan:
the target is a terminal run within 10% of a non-terminal one (wall time; the CPU
time of forge and its children is printed alongside).
"""

from __future__ import annotations

import fcntl
import os
import pty
import resource
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

from kit import Context, Figure, forge, forge_argv, git, secs, settle

from plans import BenchPlan, BenchTask

TARGET = 1.10


def make_repo(ctx: Context) -> Path:
    repo = ctx.tmp("live-repo")
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# live\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def plan(ctx: Context, name: str, n: int) -> Path:
    tasks = [
        BenchTask(id=f"t{i:03d}", run=f"echo {i} > {name}-{i}.txt", files=(f"{name}-{i}.txt",))
        for i in range(n)
    ]
    return BenchPlan(name=name, tasks=tasks, max_parallel=4).write(ctx.tmp(f"plan-{name}"))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_plain(repo: Path, name: str) -> tuple[float, float]:
    cpu0, t0 = children_cpu(), time.perf_counter()
    forge(repo, "run", name)
    return time.perf_counter() - t0, children_cpu() - cpu0


def run_tty(repo: Path, name: str, *, rows: int = 50, cols: int = 160) -> tuple[float, float, int]:
    """The run with stdout and stderr on a pseudo-terminal of rows x cols; returns
    wall, CPU and the bytes the terminal received."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    received = [0]
    tail = [b""]

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            received[0] += len(chunk)
            tail[0] = (tail[0] + chunk)[-6000:]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    env["TERM"] = "xterm-256color"
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.Popen(
        forge_argv("run", name),
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    code = proc.wait(timeout=900)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    os.close(slave)
    reader.join(timeout=5)
    os.close(master)
    if code != 0:
        text = tail[0].decode(errors="replace")
        raise RuntimeError(f"forge run {name} on a terminal exited {code}:\n{text}")
    return wall, cpu, received[0]


def run(ctx: Context) -> list[Figure]:
    n = 40 if ctx.quick else 200
    repo = make_repo(ctx)
    forge(repo, "plan", str(plan(ctx, "warm", 4)))
    forge(repo, "run", "warm")  # the first run pays for imports and slot creation
    results: dict[str, list[tuple[float, float]]] = {"tty": [], "plain": []}
    for round_ in range(2):  # interleaved, so a drift of the machine hits both
        for kind in ("plain", "tty") if round_ == 0 else ("tty", "plain"):
            name = f"{kind}{round_}"
            forge(repo, "plan", str(plan(ctx, name, n)))
            settle()
            if kind == "tty":
                wall, cpu, got = run_tty(repo, name)
                ctx.log(
                    f"  live {n} tasks on a terminal: {secs(wall)} wall, {secs(cpu)} CPU, {got} bytes drawn"
                )
            else:
                wall, cpu = run_plain(repo, name)
                ctx.log(f"  live {n} tasks to a pipe: {secs(wall)} wall, {secs(cpu)} CPU")
            results[kind].append((wall, cpu))
    tty = min(w for w, _ in results["tty"])
    plain = min(w for w, _ in results["plain"])
    tty_cpu = min(c for _, c in results["tty"])
    plain_cpu = min(c for _, c in results["plain"])
    return [
        Figure(
            bench="live",
            config=f"forge run, {n} shell tasks, 4 slots, on a 50-row terminal",
            forge=secs(tty),
            alternative=f"{secs(plain)} (output to a pipe)",
            ratio=tty / plain,
            target=TARGET,
            note=f"CPU {secs(tty_cpu)} on the terminal, {secs(plain_cpu)} to a pipe; best of 2",
        )
    ]
