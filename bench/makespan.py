"""makespan: random DAGs of tasks that sleep 0.2 to 1.0 s, run by forge with
max_parallel 4. The figure is the wall time of `forge run` divided by the lower
bound max(critical path, total work / max_parallel).

Each task's `estimate` is its sleep, as a user would size tasks. For reference the
note gives the makespan of an overhead-free greedy schedule (critical path first),
which separates the scheduling policy's loss from forge's per-task cost.
"""

from __future__ import annotations

import heapq
import json
import random
import statistics
from dataclasses import dataclass

import repogen
from kit import Context, Figure, forge, secs, settle, stopwatch
from overhead import floor, paths_for

from plans import BenchPlan, BenchTask

PARALLEL = 4
# forge's makespan over the greedy schedule that pays bare git's per-task cost.
TARGET = 1.05
PAIRS = 5


@dataclass(frozen=True)
class Dag:
    name: str
    durations: list[float]
    deps: list[list[int]]


def random_dag(name: str, n: int, *, seed: int, max_deps: int, window: int) -> Dag:
    """Task i depends on up to `max_deps` of the `window` tasks before it."""
    rng = random.Random(seed)
    durations = [round(rng.uniform(0.2, 1.0), 2) for _ in range(n)]
    deps = []
    for i in range(n):
        pool = list(range(max(0, i - window), i))
        k = min(len(pool), rng.randint(0, max_deps))
        deps.append(sorted(rng.sample(pool, k)))
    return Dag(name, durations, deps)


def critical_path(dag: Dag) -> float:
    finish: list[float] = []
    for i, d in enumerate(dag.durations):
        finish.append(d + max((finish[j] for j in dag.deps[i]), default=0.0))
    return max(finish)


def greedy(
    dag: Dag, parallel: int, *, extra: float = 0.0, actual: list[float] | None = None
) -> float:
    """List scheduling, longest remaining chain first, each task lasting its sleep
    plus `extra` seconds (or the time it `actual`ly took, when given)."""
    n = len(dag.durations)
    durations = [d + extra for d in (dag.durations if actual is None else actual)]
    dependants: list[list[int]] = [[] for _ in range(n)]
    for i, ds in enumerate(dag.deps):
        for j in ds:
            dependants[j].append(i)
    chain = [0.0] * n
    for i in reversed(range(n)):
        chain[i] = durations[i] + max((chain[k] for k in dependants[i]), default=0.0)
    waiting = [len(ds) for ds in dag.deps]
    ready = [(-chain[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    running: list[tuple[float, int]] = []
    now = 0.0
    while ready or running:
        while ready and len(running) < parallel:
            _, i = heapq.heappop(ready)
            heapq.heappush(running, (now + durations[i], i))
        now, done = heapq.heappop(running)
        for k in dependants[done]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, (-chain[k], k))
    return now


def plan_of(dag: Dag, files: int) -> BenchPlan:
    tasks = []
    for i, d in enumerate(dag.durations):
        path = repogen.file_path(i * (files // len(dag.durations)))
        tasks.append(
            BenchTask(
                id=f"t{i:03d}",
                run=f"sleep {d}; echo done >> {path}",
                files=(path,),
                deps=tuple(f"t{j:03d}" for j in dag.deps[i]),
                estimate=d,
            )
        )
    return BenchPlan(name=f"mk-{dag.name}", tasks=tasks, max_parallel=PARALLEL)


def run(ctx: Context) -> list[Figure]:
    n = 16 if ctx.quick else 50
    pairs = 2 if ctx.quick else PAIRS
    dags = [random_dag("sparse", n, seed=7, max_deps=2, window=12)]
    if not ctx.quick:
        dags.append(random_dag("dense", n, seed=11, max_deps=3, window=6))
    repo = repogen.repo(ctx, 1000)
    k = 6 if ctx.quick else 12
    figures = []
    for dag in dags:
        plan = plan_of(dag, 1000)
        cp = critical_path(dag)
        bound = max(cp, sum(dag.durations) / PARALLEL)
        ideal = greedy(dag, PARALLEL)
        # Interleaved pairs: bare git's per-task cost (checkout, add, commit, merge, one
        # at a time) measured right before each forge run, and the greedy schedule
        # that pays it; the figure is forge's makespan over that schedule.
        ratios: list[float] = []
        walls: list[float] = []
        costs: list[float] = []
        for rep in range(pairs):
            tag = f"makespan-{dag.name}-{rep}"
            offset = 7 + 31 * rep + (0 if dag.name == "sparse" else 500)
            costs.append(floor(ctx, repo, paths_for(k, 1000, offset=offset), tag, slots=1) / k)
            name = f"{plan.name}-{rep}"
            path = BenchPlan(name=name, tasks=plan.tasks, max_parallel=PARALLEL).write(
                ctx.tmp(f"plan-{name}")
            )
            forge(repo, "plan", str(path))
            settle()
            with stopwatch() as t:
                forge(repo, "run", name)
            state = json.loads(
                (repo / ".git" / "forge" / "plans" / name / "state.json").read_text()
            )
            if {x["status"] for x in state["tasks"].values()} != {"MERGED"}:
                raise RuntimeError(f"makespan plan {name} did not merge every task")
            with_git = greedy(dag, PARALLEL, extra=costs[-1])
            walls.append(t[0])
            ratios.append(t[0] / with_git)
            ctx.log(
                f"  {dag.name} pair {rep + 1}: forge run {secs(t[0])}; greedy paying bare "
                f"git's {costs[-1] * 1000:.0f} ms a task {secs(with_git)} "
                f"(ratio {ratios[-1]:.2f})"
            )
        med = statistics.median(ratios)
        figures.append(
            Figure(
                bench="makespan",
                config=f"{n} tasks, {dag.name} DAG, max_parallel {PARALLEL}",
                forge=secs(statistics.median(walls)),
                alternative=f"greedy schedule paying bare git's cost ({pairs} pairs)",
                ratio=med,
                target=TARGET,
                note=(
                    f"median of {pairs} pairs {med:.2f} (spread {min(ratios):.2f} to "
                    f"{max(ratios):.2f}); bare git's cost {1000 * statistics.median(costs):.0f} "
                    f"ms a task; to the lower bound max(critical path {secs(cp)}, work/"
                    f"{PARALLEL}) {statistics.median(walls) / bound:.2f}; an overhead-free "
                    f"greedy schedule {secs(ideal)} (ratio {ideal / bound:.2f})"
                ),
            )
        )
    return figures
