"""What a task's lane costs beside its command: the makespan DAG of `bench makespan`
(50 tasks of 0.2-1 s, 4 at once) run twice in one process, the second plan on the
first plan's slots as in the suite, each step of its attempts timed.

    python bench/lanes.py [--files 1000] [--dag sparse|dense]

prints, per task, forge's time beside the command (an attempt's wall time minus
its command's process group), its git processes and their wall time, the medians
of the attempt's steps, and when each lane's first task started; and the run's
span (first start to last merge) beside the greedy schedule given each task's
actual time, which tells what the dispatch itself loses.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import makespan
import repogen
from inside import timed_git_calls
from kit import Context, hermetic_env

from plans import BenchPlan

# (module, function) of an attempt's steps, in the order they run.
STEPS = (
    ("forge.run.attempt.local", "prepare"),
    ("forge.run.attempt.steps", "commit_and_judge"),
    ("forge.run.attempt.pipeline", "_merge"),
    ("forge.run.attempt.pipeline", "_finish"),
)


def _timed(module: Any, name: str, into: list[float], *, first: list[float] | None = None) -> None:
    real: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        if first is not None:
            first.append(t0)
        try:
            return real(*args, **kw)
        finally:
            into.append(time.perf_counter() - t0)

    setattr(module, name, wrapper)


def measure(files: int, dag_name: str) -> dict[str, Any]:
    import importlib

    from forge.base import procgroup
    from forge.git import repo as git
    from forge.plan import registry
    from forge.run import runner
    from forge.run.dispatch import workers
    from forge.run.options import RunOptions

    root = Path(tempfile.mkdtemp(prefix="forge-lanes-"))
    hermetic_env(root)
    ctx = Context(root=root, quick=False, log=lambda _line: None)
    repo_path = repogen.repo(ctx, files)
    seed, deps, window = (7, 2, 12) if dag_name == "sparse" else (11, 3, 6)
    dag = makespan.random_dag(dag_name, 50, seed=seed, max_deps=deps, window=window)
    tasks = makespan.plan_of(dag, files).tasks
    times: collections.defaultdict[str, list[float]] = collections.defaultdict(list)
    starts: list[float] = []
    _timed(workers, "run_attempt", times["attempt"], first=starts)
    _timed(procgroup, "run_group", times["command"])
    for module, name in STEPS:
        _timed(importlib.import_module(module), name, times[name])
    repo = git.discover(repo_path)
    for n in range(2):
        plan = BenchPlan(name=f"lanes-{n}", tasks=tasks, max_parallel=makespan.PARALLEL)
        recorded = registry.record(repo, plan.write(ctx.tmp(f"plan-{n}")))
        for xs in times.values():
            xs.clear()
        starts.clear()
        with timed_git_calls() as calls:
            t0 = time.perf_counter()
            rep = runner.run_plan(repo, recorded, RunOptions(verify=False), stop=threading.Event())
            wall = time.perf_counter() - t0
    if any(t.status != "MERGED" for t in rep.state.tasks.values()):
        raise SystemExit("lanes: not every task merged")
    subprocess.run(["rm", "-rf", "--", str(root)], check=False)
    n_tasks = len(tasks)
    git_calls = [x for xs in calls.values() for x in xs]
    return {
        "files": files,
        "dag": dag_name,
        "wall_s": round(wall, 3),
        "beside_command_ms": round(
            1000 * (sum(times["attempt"]) - sum(times["command"])) / n_tasks, 1
        ),
        "git_calls": round(len(git_calls) / n_tasks, 1),
        "git_ms": round(1000 * sum(git_calls) / n_tasks, 1),
        "steps_median_ms": {
            name: round(1000 * statistics.median(times[name]), 1) for _, name in STEPS
        },
        "first_starts_ms": [round(1000 * (s - t0), 1) for s in sorted(starts)[: plan.max_parallel]],
        **_schedule(dag, rep.state),
    }


def _schedule(dag: makespan.Dag, state: Any) -> dict[str, float]:
    """From the first task's start to the last merge, and the greedy schedule given
    each task's actual time (its attempt's phases): what the dispatch itself loses."""
    spans = []
    for i in range(len(dag.durations)):
        phases = state.tasks[f"t{i:03d}"].attempts[-1].phases
        spans.append((min(p.start for p in phases), max(p.end or p.start for p in phases)))
    actual = [end - start for start, end in spans]
    return {
        "span_s": round(max(e for _, e in spans) - min(s for s, _ in spans), 3),
        "greedy_given_actual_times_s": round(
            makespan.greedy(dag, makespan.PARALLEL, actual=actual), 3
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--dag", choices=("sparse", "dense"), default="sparse")
    args = ap.parse_args()
    import json

    print(json.dumps(measure(args.files, args.dag), indent=2))


if __name__ == "__main__":
    main()
