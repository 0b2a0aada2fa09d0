"""forge's own time per task, measured from inside one `forge run`: the CPU time of
forge's Python (all its threads, none of its children) plus the wall time of the git
calls the floor does not make. Unlike a difference of two wall clocks it does not
swing with the disk, so it says whether a change made forge's own work cheaper.

    python bench/inside.py --files 10000 --tasks 20 [--parallel 2]

prints one JSON object; `overhead` runs it once per repository size.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import repogen
from kit import Context, hermetic_env

from plans import BenchPlan, edit_tasks

# The git calls the floor (overhead.FLOOR_WORKER) makes for each task, by subcommand.
FLOOR_CALLS = {
    "checkout": 1,
    "add": 1,
    "write-tree": 1,
    "rev-parse": 2,
    "commit-tree": 2,
    "update-ref": 2,
    "merge-tree": 1,
}


def subcommand(argv: list[str]) -> str:
    """`git -c k=v --git-dir=X add -A` -> `add`."""
    rest = argv[1:]
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-c", "-C") else rest[1:]
    return rest[0] if rest else ""


@contextmanager
def timed_git_calls() -> Iterator[collections.defaultdict[str, list[float]]]:
    """Every `proc.run` of a git command, timed, by subcommand."""
    from forge.base import proc

    calls: collections.defaultdict[str, list[float]] = collections.defaultdict(list)
    lock = threading.Lock()
    real = proc.run

    def run(argv: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real(argv, **kw)
        finally:
            args = [str(a) for a in argv]
            if args and args[0] == "git":
                with lock:
                    calls[subcommand(args)].append(time.perf_counter() - t0)

    proc.run = run
    try:
        yield calls
    finally:
        proc.run = real


def extra_git_seconds(calls: dict[str, list[float]], tasks: int) -> float:
    """Wall time of the git calls beyond the floor's per-task set: for each
    subcommand, the calls past the floor's count, at their median duration."""
    total = 0.0
    for name, xs in calls.items():
        extra = len(xs) - FLOOR_CALLS.get(name, 0) * tasks
        if extra > 0:
            total += extra * sorted(xs)[len(xs) // 2]
    return total


def measure(files: int, tasks: int, parallel: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="forge-inside-"))
    hermetic_env(root)
    ctx = Context(root=root, quick=False, log=lambda _line: None)
    repo_path = repogen.repo(ctx, files)
    from overhead import paths_for

    plan = BenchPlan(
        name="inside",
        tasks=edit_tasks(tasks, paths_for(tasks, files)),
        max_parallel=parallel,
    )
    plan_file = plan.write(ctx.tmp("plan"))
    from forge.git import repo as git
    from forge.plan import registry
    from forge.run import runner
    from forge.run.options import RunOptions

    repo = git.discover(repo_path)
    recorded = registry.record(repo, plan_file)
    with timed_git_calls() as calls:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rep = runner.run_plan(repo, recorded, RunOptions(verify=False), stop=threading.Event())
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if any(t.status != "MERGED" for t in rep.state.tasks.values()):
        raise SystemExit("inside: not every task merged")
    subprocess.run(["rm", "-rf", "--", str(root)], check=False)
    extra = extra_git_seconds(calls, tasks)
    return {
        "files": files,
        "tasks": tasks,
        "wall_s": wall,
        "python_cpu_per_task_s": cpu / tasks,
        "extra_git_per_task_s": extra / tasks,
        "own_per_task_s": (cpu + extra) / tasks,
        "git_calls_per_task": sum(len(x) for x in calls.values()) / tasks,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--parallel", type=int, default=2)
    args = ap.parse_args()
    print(json.dumps(measure(args.files, args.tasks, args.parallel)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
