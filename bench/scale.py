"""scale: forge on a plan of 1000 tasks against the same at 100.

- `forge plan` of the 1000-task plan (target < 2 s) and `forge status` once it has
  run (target < 0.3 s, median of 5);
- a state write per transition, in-process: the journal line a task's change
  appends, at 100 and at 1000 tasks (the ratio; target <= 1.2), with the whole
  snapshot (what every write cost before) for comparison;
- forge's own time per task: `forge run` of trivial shell tasks (4 slots), wall
  time per task at 1000 against 100 (target <= 1.2).

--quick: 50 and 200 tasks.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from kit import Context, Figure, forge, forge_argv, git, median_of, ms, secs, settle

from plans import BenchPlan, BenchTask

PLAN_SECONDS = 2.0
STATUS_SECONDS = 0.3
TARGET = 1.2


def make_repo(ctx: Context, name: str) -> Path:
    repo = ctx.tmp(name)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# scale\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def plan_of(ctx: Context, name: str, n: int) -> Path:
    """n shell tasks writing their own file, 50 to a folder, every tenth after a
    task ten places back (a DAG of some depth)."""
    tasks = []
    for i in range(n):
        path = f"src/m{i // 50}/f{i}.txt"
        deps = (f"t{i - 10:04d}",) if i >= 10 and i % 10 == 0 else ()
        run = f"mkdir -p src/m{i // 50} && echo {i} > {path}"
        tasks.append(BenchTask(id=f"t{i:04d}", run=run, files=(path,), deps=deps))
    return BenchPlan(name=name, tasks=tasks, max_parallel=4).write(ctx.tmp(f"plan-{name}"))


def write_cost(n: int, *, journal: bool) -> float:
    """Seconds per state save of one task's change, in a plan of n tasks each with
    an attempt (median of several hundred saves)."""
    import tempfile

    from forge.base.files import StateDir
    from forge.run.state import events as ev
    from forge.run.state import reducer
    from forge.run.state.records import Phase
    from forge.run.state.run_state import Attempt, RunState, Status, TaskState
    from forge.run.state.store import StateStore

    with tempfile.TemporaryDirectory() as tmp:
        state_dir = StateDir(Path(tmp))
        store = StateStore(state_dir, "p")
        tasks = {}
        for i in range(n):
            ts = TaskState(id=f"t{i:04d}", status=Status.MERGED, reason="")
            ts.attempts.append(
                Attempt(
                    number=1,
                    agent="run",
                    status=Status.MERGED,
                    duration=1.0,
                    log=f"/x/logs/t{i}/attempt-1/agent.log",
                    phases=[Phase("run", 1.0, 2.0)],
                )
            )
            tasks[ts.id] = ts
        st = RunState(plan="p", integration="refs/heads/forge/p-integration", tasks=tasks)
        store.save(st)
        times = []
        for k in range(300):
            tid = f"t{k % n:04d}"
            change = ev.AttemptEnded(tid, Status.MERGED, f"change {k}")
            t0 = time.perf_counter()
            if journal:
                store.record(st, change)
            else:
                reducer.apply(st, change)
                store.save(st)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)


def run_per_task(ctx: Context, n: int) -> tuple[float, Path]:
    repo = make_repo(ctx, f"scale-{n}")
    name = f"s{n}"
    forge(repo, "plan", str(plan_of(ctx, name, n)))
    settle()
    t0 = time.perf_counter()
    forge(repo, "run", name, timeout=3600)
    return (time.perf_counter() - t0) / n, repo


def run(ctx: Context) -> list[Figure]:
    small, large = (50, 200) if ctx.quick else (100, 1000)
    figures = []

    # forge plan of the large plan
    repo = make_repo(ctx, "scale-plan")
    plan = plan_of(ctx, "big", large)
    took = median_of(lambda: forge(repo, "plan", str(plan)), runs=3)
    ctx.log(f"  forge plan, {large} tasks: {secs(took)}")
    figures.append(
        Figure(
            bench="scale",
            config=f"forge plan, {large} tasks",
            forge=secs(took),
            alternative="-",
            ratio=took / PLAN_SECONDS,
            target=None,
            note=f"target < {PLAN_SECONDS:g} s",
            seconds=took,
            max_seconds=PLAN_SECONDS,
        )
    )

    # one state write per transition
    j_small, j_large = write_cost(small, journal=True), write_cost(large, journal=True)
    s_small, s_large = write_cost(small, journal=False), write_cost(large, journal=False)
    ctx.log(
        f"  state write of one task's change: journal {ms(j_small)} at {small}, "
        f"{ms(j_large)} at {large}; whole snapshot {ms(s_small)} / {ms(s_large)}"
    )
    figures.append(
        Figure(
            bench="scale",
            config=f"a state write per transition, {large} vs {small} tasks",
            forge=f"{j_large * 1e6:.0f} us vs {j_small * 1e6:.0f} us",
            alternative=f"whole snapshot {s_large * 1e6:.0f} us vs {s_small * 1e6:.0f} us",
            ratio=j_large / j_small,
            target=TARGET,
            note="journal event (median of 300); the snapshot is what each write would cost",
        )
    )

    # forge's own time per task, and status on the large plan once it has run
    per_small, _ = run_per_task(ctx, small)
    per_large, big_repo = run_per_task(ctx, large)
    ctx.log(f"  forge run per task: {ms(per_small)} at {small}, {ms(per_large)} at {large}")
    figures.append(
        Figure(
            bench="scale",
            config=f"forge run, trivial shell tasks, per task, {large} vs {small} tasks",
            forge=ms(per_large),
            alternative=f"{ms(per_small)} at {small}",
            ratio=per_large / per_small,
            target=TARGET,
            note="4 slots; wall time of the run divided by its tasks",
        )
    )
    settle()
    import subprocess

    status = median_of(
        lambda: subprocess.run(
            forge_argv("status", f"s{large}"), cwd=big_repo, capture_output=True, check=True
        ),
        runs=5,
    )
    ctx.log(f"  forge status, {large} tasks run: {ms(status)}")
    figures.append(
        Figure(
            bench="scale",
            config=f"forge status, {large}-task plan run",
            forge=ms(status),
            alternative="-",
            ratio=status / STATUS_SECONDS,
            target=None,
            note=f"median of 5; target < {STATUS_SECONDS:g} s",
            seconds=status,
            max_seconds=STATUS_SECONDS,
        )
    )
    return figures
