"""makespan: random DAGs of tasks that sleep 0.2 to 1.0 s, run by forge with
max_parallel 4. The figure is the wall time of `forge run` divided by the makespan
of the greedy schedule paying bare git's per-task cost (below); the note gives the
ratio to the lower bound max(critical path, total work / max_parallel) too.

Each task's `estimate` is its sleep, as a user would size tasks. For reference the
note gives the makespan of an overhead-free greedy schedule (critical path first),
which separates the scheduling policy's loss from forge's per-task cost.

The alternative is the greedy schedule paying bare git's per-task cost, measured
the way forge's runs pay it: a checkout, the edit, a commit and a merge in a
worktree that already exists (no `git worktree add` per task, which forge does not
make). Both warmths, in ABBA pairs (kit.rounds): cold (a fresh copy of the
repository for each side of each pair; the schedule also pays one `git worktree add`, its slots made side by side,
as forge makes its slots) and warm (forge takes over the idle slots of the plan
before, bare git's worktree is kept).
"""

from __future__ import annotations

import heapq
import json
import random
import statistics
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import repogen
from kit import (
    ALTERNATIVE,
    Context,
    Figure,
    forge,
    git,
    rounds,
    secs,
    settle,
    spread,
    stopwatch,
    timed,
)
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


def _forge_run(repo: Path, ctx: Context, plan: BenchPlan, name: str) -> float:
    path = BenchPlan(name=name, tasks=plan.tasks, max_parallel=PARALLEL).write(
        ctx.tmp(f"plan-{name}")
    )
    forge(repo, "plan", str(path))
    settle()
    with stopwatch() as t:
        forge(repo, "run", name)
    state = json.loads((repo / ".git" / "forge" / "plans" / name / "state.json").read_text())
    if {x["status"] for x in state["tasks"].values()} != {"MERGED"}:
        raise RuntimeError(f"makespan plan {name} did not merge every task")
    return t[0]


def _worktree_add(ctx: Context, repo: Path) -> float:
    """Seconds of one `git worktree add` of the repository (the one a cold slot pays)."""
    where = ctx.tmp("makespan-add") / "slot"
    settle()
    took = timed(lambda: git(repo, "worktree", "add", "-q", "--detach", str(where), "main"))
    git(repo, "worktree", "remove", "--force", str(where))
    return took


def _git_cost(ctx: Context, repo: Path, paths: list[str], tag: str, kept: Path | None) -> float:
    """Bare git's seconds a task in one worktree made before the clock starts."""
    wall, _ = floor(ctx, repo, paths, tag, slots=1, keep=kept, premade=True)
    return wall / len(paths)


@dataclass
class _Pairs:
    """Each pair's forge makespan, bare git's per-task cost and the schedule's makespan."""

    walls: list[float]
    costs: list[float]
    schedules: list[float]

    @property
    def ratios(self) -> list[float]:
        return [w / s for w, s in zip(self.walls, self.schedules, strict=True)]


def _measure(
    ctx: Context, source: Path, dag: Dag, plan: BenchPlan, pairs: int, *, cold: bool
) -> _Pairs:
    """Each measured pair at one warmth (kit.rounds): forge's run in its copy, bare git's
    per-task cost in the other's (cold: each side a fresh copy; warm: both keep theirs)."""
    k = 6 if ctx.quick else 12
    warmth = "cold" if cold else "warm"
    out = _Pairs([], [], [])
    for rnd in rounds(ctx, source, f"makespan-{dag.name}", pairs, cold=cold):
        tag = f"makespan-{dag.name}-{warmth}-{rnd.index + 1}"
        offset = 7 + 31 * (rnd.index + 1) + (0 if dag.name == "sparse" else 500)
        paths = paths_for(k, 1000, offset=offset)
        add = _worktree_add(ctx, rnd.repos[0]) if cold else 0.0
        cost, wall = rnd.run(
            partial(_git_cost, ctx, rnd.repos[0], paths, tag, rnd.kept),
            partial(_forge_run, rnd.repos[1], ctx, plan, tag),
        )
        if not rnd.measured:  # warm: the round that leaves slots and a worktree to reuse
            continue
        schedule = greedy(dag, PARALLEL, extra=cost) + add
        out.walls.append(wall)
        out.costs.append(cost)
        out.schedules.append(schedule)
        ctx.log(
            f"  {dag.name} {warmth} pair {rnd.index + 1} ({rnd.order}): forge run {secs(wall)}; "
            f"greedy paying bare git's {cost * 1000:.0f} ms a task"
            + (f" and a worktree add of {add * 1000:.0f} ms" if cold else "")
            + f" {secs(schedule)} (ratio {wall / schedule:.2f})"
        )
    return out


def run(ctx: Context) -> list[Figure]:
    n = 16 if ctx.quick else 50
    pairs = 2 if ctx.quick else PAIRS
    dags = [random_dag("sparse", n, seed=7, max_deps=2, window=12)]
    if not ctx.quick:
        dags.append(random_dag("dense", n, seed=11, max_deps=3, window=6))
    source = repogen.repo(ctx, 1000)
    figures = []
    for dag in dags:
        plan = plan_of(dag, 1000)
        cp = critical_path(dag)
        bound = max(cp, sum(dag.durations) / PARALLEL)
        ideal = greedy(dag, PARALLEL)
        for cold in (True, False):
            got = _measure(ctx, source, dag, plan, pairs, cold=cold)
            warmth = "cold" if cold else "warm"
            wall = statistics.median(got.walls)
            figures.append(
                Figure(
                    bench="makespan",
                    config=f"{n} tasks, {dag.name} DAG, max_parallel {PARALLEL}, {warmth}",
                    forge=secs(wall),
                    alternative=f"greedy schedule paying bare git's cost, {warmth} "
                    f"({pairs} ABBA pairs)",
                    ratio=statistics.median(got.ratios),
                    target=TARGET,
                    kind=ALTERNATIVE,
                    note=(
                        f"{warmth}: median of {pairs} ABBA pairs "
                        f"{spread(got.ratios, 1, '{:.2f}')}; bare git's cost "
                        f"{spread(got.costs, 1000, '{:.0f}')} ms a task in an existing "
                        f"worktree; to the lower bound max(critical path {secs(cp)}, work/"
                        f"{PARALLEL}) {wall / bound:.2f}; an overhead-free greedy schedule "
                        f"{secs(ideal)} (ratio {ideal / bound:.2f})"
                    ),
                )
            )
    return figures
