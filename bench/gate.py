"""gate: what landing through the gate costs. Verifications per landed task with no
failure; verifications to find one culprit among N (against the bound
1 + ceil(log2 N) + 1 and against verifying each task alone); the makespan of a
plan with a 1 s verification under `gate = "queue"` against `gate = "off"`
(merge as tasks finish, verify once at the end); the time from the last
task's finish to the final verdict under both; and whether speculation pays:
the same plan's makespan with `verify_parallel = 1` against `2`, a few runs each
(the machine is shared: the spread is part of the figure), for a verification
that sleeps and one that keeps a core busy.
"""

from __future__ import annotations

import json
import math
import random
import statistics
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
    parallel: int | None = None,
    ok: tuple[int, ...] = (0,),
    reruns: int = 0,
    window: str | None = None,
) -> tuple[Path, float, float]:
    """Plan and run in a fresh repository; (repo, makespan, wall time of forge's exit)."""
    work = ctx.tmp(name)
    repo = _repo(work)
    extra = {"verify_reruns": str(reruns), "gate": json.dumps(gate)}
    if batch_max is not None:
        extra["batch_max"] = str(batch_max)
    if parallel is not None:
        extra["verify_parallel"] = str(parallel)
    if window is not None:
        extra["batch_window"] = json.dumps(window)
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


def _culprit_run(
    ctx: Context, n: int, *, parallel: int = 1, seconds: float = 0.0, tag: str = "culprit"
) -> tuple[int, float, list[dict[str, object]]]:
    """One deterministic culprit among n (gate = end, the default verify_reruns = 2):
    (verification runs, the run's time, the gate's verifications)."""
    # A name of its own: the checkouts of a plan's key live under the repo folder's name
    name = f"gate-{tag}-{n}-p{parallel}"
    counter = ctx.root / f"{name}.count"
    bad = f"t{(2 * n) // 3:02d}.txt"  # not the first: the head is never judged
    repo, took, _ = _run(
        ctx,
        name,
        _tasks(n, sleeps=[0.0] * n, done=ctx.root / f"{name}.done"),
        verify=_verify(counter, seconds, fail_if=bad),
        gate="end",
        batch_max=n,
        parallel=parallel,
        ok=(5,),
        reruns=2,
    )
    statuses = _landed(repo)
    failed = [t for t, s in statuses.items() if s != "MERGED"]
    if failed != [bad.removesuffix(".txt")]:
        raise RuntimeError(f"gate: expected only {bad} to be blamed, got {failed}")
    (state,) = (repo / ".git/forge/plans").glob("*/state.json")
    steps = json.loads(state.read_text())["gate_steps"]
    return _count(counter), took, steps


def culprit(ctx: Context, n: int) -> Figure:
    runs, took, _steps = _culprit_run(ctx, n)
    bound = 2 + math.ceil(math.log2(n)) + 1
    return Figure(
        bench="gate",
        config=f"one deterministic culprit among {n} (gate = end, verify_reruns = 2): runs",
        forge=f"{runs}",
        alternative=f"bound {bound} (2 + ceil(log2 {n}) + 1 to land the rest); {n} one by one",
        ratio=runs / bound,
        target=1.0,
        note=f"run took {secs(took)}",
    )


def _bisection_span(steps: list[dict[str, object]]) -> float:
    """From the first bisection step's start to the last one's end."""
    probes = [s for s in steps if s.get("name") == "bisection"]
    return max(float(str(s["end"])) for s in probes) - min(float(str(s["start"])) for s in probes)


def parallel_bisection(ctx: Context) -> list[Figure]:
    """Wall time of a bisection with verify_parallel = 3 against 1 (a 1 s
    verification that sleeps; one culprit among 16)."""
    n, seconds = (8, 0.5) if ctx.quick else (16, 1.0)
    _, _, serial = _culprit_run(ctx, n, parallel=1, seconds=seconds, tag="bisect")
    _, _, par = _culprit_run(ctx, n, parallel=3, seconds=seconds, tag="bisect")
    one, three = _bisection_span(serial), _bisection_span(par)
    # counted from the records (the counter file races when runs overlap)
    serial_runs = sum(int(str(s.get("runs", 0))) for s in serial)
    par_runs = sum(int(str(s.get("runs", 0))) for s in par)
    return [
        Figure(
            bench="gate",
            config=(
                f"bisection wall time, one culprit among {n}, {seconds:g} s verification: "
                "verify_parallel 3 vs 1"
            ),
            forge=f"{secs(three)} ({par_runs} runs in all)",
            alternative=f"{secs(one)} ({serial_runs} runs in all)",
            ratio=three / one,
            target=None,
        )
    ]


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


def _verify_lines(log: Path, seconds: float, *, busy: bool) -> str:
    """A verification that appends a line per run (safe when two run at once) and
    takes `seconds`, asleep or keeping a core busy."""
    work = (
        f"python3 -c 'import time; e = time.time() + {seconds:g}\nwhile time.time() < e: pass'"
        if busy
        else f"sleep {seconds:g}"
    )
    return f"echo run >> {log}; {work}"


def speculation(ctx: Context) -> list[Figure]:
    """`verify_parallel = 2` against 1: the makespan plan above (batch_max 8), and a
    backlog (tasks finish faster than batches of 2 are verified), each with a
    verification that sleeps and one that keeps a core busy. The measurement behind
    the default (1 unless 2 pays on this machine)."""
    reps = 1 if ctx.quick else 3
    figures = []
    scenarios = (("makespan plan", 0.5, 1.5, 8), ("backlog", 0.2, 0.6, 2))
    for label, low, high, batch_max in scenarios:
        for busy in (False, True):
            figures.append(_speculation(ctx, label, (low, high), batch_max, busy, reps))
    return figures


def _speculation(
    ctx: Context, label: str, span: tuple[float, float], batch_max: int, busy: bool, reps: int
) -> Figure:
    n = 8 if ctx.quick else 20
    verify_s = 1.0
    rng = random.Random(7)
    sleeps = [round(rng.uniform(*span), 2) for _ in range(n)]
    kind = "busy" if busy else "sleeping"
    took: dict[int, list[float]] = {1: [], 2: []}
    runs: dict[int, list[int]] = {1: [], 2: []}
    for rep in range(reps):
        for parallel in (1, 2):  # interleaved, so load drifts hit both alike
            name = f"gate-par{parallel}-{batch_max}-{kind}-{rep}"
            log = ctx.root / f"{name}.log"
            repo, seconds, _ = _run(
                ctx,
                name,
                _tasks(n, sleeps=sleeps, done=ctx.root / f"{name}.done"),
                verify=_verify_lines(log, verify_s, busy=busy),
                gate="queue",
                batch_max=batch_max,
                parallel=parallel,
            )
            if set(_landed(repo).values()) != {"MERGED"}:
                raise RuntimeError(f"gate: not every task landed, verify_parallel {parallel}")
            took[parallel].append(seconds)
            runs[parallel].append(len(log.read_text().splitlines()))

    def spread(xs: list[float]) -> str:
        return f"median {secs(statistics.median(xs))} ({secs(min(xs))}-{secs(max(xs))})"

    return Figure(
        bench="gate",
        config=(
            f"{label}: {n} tasks of {span[0]:g}-{span[1]:g} s, 4 at once, batch_max {batch_max}, "
            f"{verify_s:g} s {kind} verification, {reps} runs: verify_parallel 2 vs 1"
        ),
        forge=f"{spread(took[2])}, verifications {runs[2]}",
        alternative=f"{spread(took[1])}, verifications {runs[1]}",
        ratio=statistics.median(took[2]) / statistics.median(took[1]),
        target=None,
    )


def run(ctx: Context) -> list[Figure]:
    figures = no_failure(ctx)
    for n in (8,) if ctx.quick else (8, 16, 32):
        figures.append(culprit(ctx, n))
    figures += parallel_bisection(ctx)
    figures += makespan(ctx)
    if not ctx.quick:
        figures += batch_sizes(ctx)
    return figures
