"""Where a `forge run` spends its time: runs a plan of no-op shell tasks in-process
and adds up the time of every git call (by subcommand and by the forge function
that made it), every state save and every task command.

    python bench/profile_run.py [--files 10000] [--tasks 20] [--parallel 2] [--verify CMD]

A diagnostic for the overhead benchmark, not a benchmark itself: the wrapping adds
a little time of its own.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import repogen
from kit import Context, hermetic_env
from overhead import paths_for

from plans import BenchPlan, edit_tasks

Totals = collections.defaultdict[str, list[float]]


def caller() -> str:
    """The innermost forge function outside proc.py, procgroup.py and git.py on the stack."""
    frame = sys._getframe(2)
    while frame is not None:
        mod = frame.f_globals.get("__name__", "")
        if mod.startswith("forge.") and mod not in (
            "forge.base.proc",
            "forge.base.procgroup",
            "forge.git.repo",
        ):
            return f"{mod.removeprefix('forge.')}.{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def instrument(by_cmd: Totals, by_caller: Totals, other: Totals) -> None:
    from forge.base import proc, procgroup
    from forge.run.state import store as runstate

    lock = threading.Lock()
    real_run = proc.run

    def run(argv: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_run(argv, **kw)
        finally:
            dt = time.perf_counter() - t0
            args = list(argv)
            if args and args[0] == "git":
                # Skip global options (`--git-dir=...`, `-c key=value`) to the subcommand.
                rest = args[1:]
                while rest and rest[0].startswith("-"):
                    rest = rest[2:] if rest[0] == "-c" else rest[1:]
                slot = " (slot)" if any(a.startswith("--git-dir=") for a in args) else ""
                name = f"git {rest[0] if rest else ''}{slot}"
            else:
                name = str(args[0])
            with lock:
                by_cmd[name].append(dt)
                by_caller[f"{caller()} -> {name}"].append(dt)

    proc.run = run
    real_group = procgroup.run_group

    def run_group(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_group(*a, **kw)
        finally:
            with lock:
                other["task command (process group)"].append(time.perf_counter() - t0)

    procgroup.run_group = run_group
    real_save, real_record = runstate.StateStore.save, runstate.StateStore.record

    def save(self: Any, st: Any, **kw: Any) -> None:
        t0 = time.perf_counter()
        try:
            real_save(self, st, **kw)
        finally:
            with lock:
                other["state.json save (fsync)"].append(time.perf_counter() - t0)

    def record(self: Any, st: Any, *said: Any, later: bool = False) -> None:
        t0 = time.perf_counter()
        try:
            real_record(self, st, *said, later=later)
        finally:
            with lock:
                other["state journal write"].append(time.perf_counter() - t0)

    runstate.StateStore.save = save  # type: ignore[method-assign]
    runstate.StateStore.record = record  # type: ignore[method-assign]


def report(title: str, totals: Totals, wall: float, tasks: int, top: int) -> None:
    print(f"\n{title}")
    print(f"{'total s':>8} {'% wall':>7} {'calls':>6} {'per task ms':>12}  what")
    for name, xs in sorted(totals.items(), key=lambda kv: -sum(kv[1]))[:top]:
        s = sum(xs)
        print(f"{s:8.2f} {100 * s / wall:6.0f}% {len(xs):6d} {1000 * s / tasks:12.1f}  {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--verify", metavar="CMD", help="verify the result with this command")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="forge-profile-"))
    hermetic_env(root)
    ctx = Context(root=root, quick=False)
    repo_path = repogen.repo(ctx, args.files)
    plan = BenchPlan(
        name="prof",
        tasks=edit_tasks(args.tasks, paths_for(args.tasks, args.files)),
        max_parallel=args.parallel,
        verify=args.verify,
    )
    plan_file = plan.write(ctx.tmp("plan"))

    by_cmd: Totals = collections.defaultdict(list)
    by_caller: Totals = collections.defaultdict(list)
    other: Totals = collections.defaultdict(list)
    t_import = time.perf_counter()
    from forge.git import repo as git
    from forge.plan import registry
    from forge.run import runner
    from forge.run.options import RunOptions

    t_import = time.perf_counter() - t_import
    instrument(by_cmd, by_caller, other)
    repo = git.discover(repo_path)
    t0 = time.perf_counter()
    recorded = registry.record(repo, plan_file)
    t_plan = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = runner.run_plan(
        repo, recorded, RunOptions(verify=args.verify is not None), stop=threading.Event()
    )
    wall = time.perf_counter() - t0
    bad = {t.id: t.status for t in rep.state.tasks.values() if t.status != "MERGED"}
    print(
        f"{args.files} files, {args.tasks} tasks, max_parallel {args.parallel}: "
        f"import {t_import:.2f} s, plan {t_plan:.2f} s, run {wall:.2f} s "
        f"({wall / args.tasks:.3f} s/task){'; NOT MERGED: ' + str(bad) if bad else ''}"
    )
    print("(totals add up time across threads: with parallel slots they exceed the wall)")
    report("git calls by subcommand", by_cmd, wall, args.tasks, 20)
    report("git calls by forge caller", by_caller, wall, args.tasks, 25)
    report("other", other, wall, args.tasks, 5)
    subprocess.run(["rm", "-rf", "--", str(root)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
