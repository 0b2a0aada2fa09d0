"""gate: what landing through the gate costs. Verifications per landed task with no
failure; verifications to find one culprit among N (against the bound
1 + ceil(log2 N) + 1 and against verifying each task alone); the makespan of a
plan with a 1 s verification under `gate = "queue"` against `gate = "off"`
(merge as tasks finish, verify once at the end); and the time from the last
task's finish to the final verdict under both.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from kit import Context, Figure, forge, git, secs, settle

from plans import BenchPlan, BenchTask


def _repo(work: Path) -> Path:
    repo = work / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("gate bench\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def _verify(counter: Path, seconds: float, *, fail_if: str | None = None) -> str:
    """A verification that counts its runs, takes `seconds`, and fails when the
    file `fail_if` is in the tree."""
    script = f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}"
    if seconds:
        script += f"; sleep {seconds:g}"
    if fail_if:
        script += f"; test ! -f {fail_if}"
    return script


def _tasks(n: int, *, sleeps: list[float], done: Path) -> list[BenchTask]:
    return [
        BenchTask(
            id=f"t{i:02d}",
            run=f"sleep {sleeps[i]:g}; echo {i} > t{i:02d}.txt; date +%s.%N >> {done}",
            files=(f"t{i:02d}.txt",),
        )
        for i in range(n)
    ]


def _run(
    ctx: Context,
    name: str,
    tasks: list[BenchTask],
    *,
    verify: str,
    gate: str,
    max_parallel: int = 4,
    batch_max: int | None = None,
    ok: tuple[int, ...] = (0,),
) -> tuple[Path, float, float]:
    """Plan and run in a fresh repository; (repo, makespan, wall time of forge's exit)."""
    work = ctx.tmp(name)
    repo = _repo(work)
    extra = {"verify_reruns": "0", "gate": json.dumps(gate)}
    if batch_max is not None:
        extra["batch_max"] = str(batch_max)
    # A plan name of its own: worktrees live under <root>/<repo folder>/<plan>, and
    # every repository here is a folder named `repo`.
    plan = BenchPlan(name=name, tasks=tasks, max_parallel=max_parallel, verify=verify, extra=extra)
    forge(repo, "plan", str(plan.write(work)))
    settle()
    t0 = time.perf_counter()
    forge(repo, "run", name, ok=ok)
    took = time.perf_counter() - t0
    return repo, took, time.time()


def _landed(repo: Path) -> dict[str, str]:
    (state,) = (repo / ".git/forge/plans").glob("*/state.json")
    data = json.loads(state.read_text())
    return {tid: t["status"] for tid, t in data["tasks"].items()}


def _count(counter: Path) -> int:
    return int(counter.read_text()) if counter.exists() else 0


def no_failure(ctx: Context) -> list[Figure]:
    n = 8 if ctx.quick else 24
    rng = random.Random(11)
    sleeps = [round(rng.uniform(0.1, 0.5), 2) for _ in range(n)]
    counter = ctx.root / "gate-nofail.count"
    repo, took, _ = _run(
        ctx,
        "gate-nofail",
        _tasks(n, sleeps=sleeps, done=ctx.root / "nofail.done"),
        verify=_verify(counter, 0.3),
        gate="queue",
    )
    landed = sum(1 for s in _landed(repo).values() if s == "MERGED")
    if landed != n:
        raise RuntimeError(f"gate: {landed} of {n} tasks landed with no failure")
    runs = _count(counter)
    return [
        Figure(
            bench="gate",
            config=f"{n} tasks, 0.3 s verification, no failure: verifications per landed task",
            forge=f"{runs} verifications ({runs / n:.2f} a task)",
            alternative=f"{n} (one a task)",
            ratio=runs / n,
            target=None,
            note=f"makespan {secs(took)}; batches average {n / runs:.1f} tasks",
        )
    ]


def culprit(ctx: Context, n: int) -> Figure:
    counter = ctx.root / f"gate-culprit-{n}.count"
    bad = f"t{(2 * n) // 3:02d}.txt"  # not the first: the head is never judged
    repo, took, _ = _run(
        ctx,
        f"gate-culprit-{n}",
        _tasks(n, sleeps=[0.0] * n, done=ctx.root / f"culprit-{n}.done"),
        verify=_verify(counter, 0.0, fail_if=bad),
        gate="end",
        batch_max=n,
        ok=(5,),
    )
    statuses = _landed(repo)
    failed = [t for t, s in statuses.items() if s != "MERGED"]
    if failed != [bad.removesuffix(".txt")]:
        raise RuntimeError(f"gate: expected only {bad} to be blamed, got {failed}")
    runs = _count(counter)
    bound = 1 + math.ceil(math.log2(n)) + 1
    return Figure(
        bench="gate",
        config=f"one culprit among {n} (gate = end): verifications",
        forge=f"{runs}",
        alternative=f"bound {bound} (1 + ceil(log2 {n}) + 1); {n} one by one",
        ratio=runs / bound,
        target=1.0,
        note=f"run took {secs(took)}",
    )


def makespan(ctx: Context) -> list[Figure]:
    n = 8 if ctx.quick else 20
    verify_s = 0.3 if ctx.quick else 1.0
    low, high = (0.3, 0.8) if ctx.quick else (0.5, 1.5)
    rng = random.Random(7)
    sleeps = [round(rng.uniform(low, high), 2) for _ in range(n)]
    out = {}
    for gate in ("off", "queue"):
        counter = ctx.root / f"gate-makespan-{gate}.count"
        done = ctx.root / f"makespan-{gate}.done"
        repo, took, ended = _run(
            ctx,
            f"gate-makespan-{gate}",
            _tasks(n, sleeps=sleeps, done=done),
            verify=_verify(counter, verify_s),
            gate=gate,
        )
        if set(_landed(repo).values()) != {"MERGED"}:
            raise RuntimeError(f"gate: not every task landed under gate = {gate}")
        last = max(float(x) for x in done.read_text().split())
        out[gate] = (took, ended - last, _count(counter))
    (off, off_tail, off_runs), (queue, queue_tail, queue_runs) = out["off"], out["queue"]
    config = f"{n} tasks of {low:g}-{high:g} s, 4 at once, {verify_s:g} s verification"
    return [
        Figure(
            bench="gate",
            config=f"makespan, {config}: queue vs off",
            forge=f"{secs(queue)} ({queue_runs} verifications)",
            alternative=f"{secs(off)} ({off_runs} verification)",
            ratio=queue / off,
            target=1.2,
        ),
        Figure(
            bench="gate",
            config=f"last task's finish to the final verdict, {config}",
            forge=secs(queue_tail),
            alternative=f"{secs(off_tail)} (gate = off)",
            ratio=queue_tail / off_tail,
            target=None,
            note="the figure includes forge's exit (the report, the state written)",
        ),
    ]


def batch_sizes(ctx: Context) -> list[Figure]:
    """How `batch_max` moves the makespan when verifying is slower than tasks finish:
    the measurement behind its default."""
    n, verify_s = 20, 1.0
    rng = random.Random(5)
    sleeps = [round(rng.uniform(0.2, 0.6), 2) for _ in range(n)]
    figures = []
    base = None
    for batch_max in (1, 2, 4, 8, 16):
        counter = ctx.root / f"gate-batch-{batch_max}.count"
        _repo_path, took, _ = _run(
            ctx,
            f"gate-batch-{batch_max}",
            _tasks(n, sleeps=sleeps, done=ctx.root / f"batch-{batch_max}.done"),
            verify=_verify(counter, verify_s),
            gate="queue",
            batch_max=batch_max,
        )
        base = base or took
        figures.append(
            Figure(
                bench="gate",
                config=f"batch_max {batch_max}: {n} tasks of 0.2-0.6 s, {verify_s:g} s verification",
                forge=f"{secs(took)} ({_count(counter)} verifications)",
                alternative=f"{secs(base)} (batch_max 1)",
                ratio=took / base,
                target=None,
            )
        )
    return figures


def run(ctx: Context) -> list[Figure]:
    figures = no_failure(ctx)
    for n in (8,) if ctx.quick else (8, 16, 32):
        figures.append(culprit(ctx, n))
    figures += makespan(ctx)
    if not ctx.quick:
        figures += batch_sizes(ctx)
    return figures
