"""gate-window: fixed batches against a window that adapts, on a stream of tasks of
which 0 %, 10 % or 30 % break the verification.

A simulation over the gate's own logic (forge/run/gate/bisection.py: the batch,
its bisection, the requeue): tasks become QUEUED at a steady rate (3 per
verification time), each a deterministic culprit with the given probability (the
same tasks under every policy); a verification run takes one time unit, and a
failure costs the run that confirms it unless the same failure was already
confirmed in the batch (forge/verify/flakes.py). Measured: verification runs per
landed task and the makespan (in verification times), for `batch_max` 1, 4, 8
fixed and for the window that halves after a failed batch and grows by one after
each pass (ceiling 8).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import gate as gate_bench
from kit import Context, Figure, secs

from forge.run.gate import bisection as gate
from forge.verify.records import Verdict

ARRIVALS_PER_RUN = 3


@dataclass(frozen=True)
class Judged:
    verdict: Verdict


@dataclass(frozen=True)
class Result:
    runs: int
    landed: int
    makespan: float

    @property
    def per_task(self) -> float:
        return self.runs / max(1, self.landed)


def simulate(n: int, culprits: set[int], *, batch_max: int, adaptive: bool) -> Result:
    arrivals = [i / ARRIVALS_PER_RUN for i in range(n)]
    window = gate.Window(batch_max)
    queue: list[int] = []
    now, runs, landed, nxt = 0.0, 0, 0, 0
    while nxt < n or queue:
        if not queue:
            now = max(now, arrivals[nxt])
        while nxt < n and arrivals[nxt] <= now:
            queue.append(nxt)
            nxt += 1
        size = window.size if adaptive else batch_max
        batch = [f"t{i}" for i in queue[:size]]
        del queue[:size]
        spent, confirmed = 0, set[frozenset[str]]()

        def build(tasks: Sequence[str]) -> gate.Chain:
            return gate.Chain(
                tuple(gate.Step(t, "+".join(tasks[: k + 1])) for k, t in enumerate(tasks))
            )

        def judge(commit: str, confirmed: set[frozenset[str]] = confirmed) -> Judged:
            nonlocal spent
            if commit == "head":  # it passed when it landed: a remembered verdict
                return Judged(Verdict.PASS)
            failing = frozenset(t for t in commit.split("+") if int(t[1:]) in culprits)
            spent += 1
            if not failing:
                return Judged(Verdict.PASS)
            if failing not in confirmed:
                spent += 1  # the rerun that confirms it
                confirmed.add(failing)
            return Judged(Verdict.FAIL)

        out = gate.run_batch(batch, head="head", build=build, judges=gate.Judges(judge))
        runs, now = runs + spent, now + spent
        landed += len(out.landed)
        queue[:0] = [int(t[1:]) for t in out.requeue]
        if out.culprit is not None:
            window.failed()
        else:
            window.passed()
    return Result(runs, landed, now)


def real(ctx: Context, rate: float) -> Figure:
    """The same comparison through `forge run` (full run only): 20 tasks of
    0.2-0.6 s, 4 at once, a 0.3 s verification, batch_max 8, `batch_window`
    adaptive against fixed."""
    n = 20
    rng = random.Random(17)
    bad = sorted(f"t{i:02d}.txt" for i in range(n) if rng.random() < rate)
    sleeps = [round(rng.uniform(0.2, 0.6), 2) for _ in range(n)]
    out = {}
    for window in ("adaptive", "fixed"):
        name = f"gate-window-{rate * 100:.0f}-{window}"  # a checkout key of its own
        log = ctx.root / f"{name}.log"
        verify = f"echo run >> {log}; sleep 0.3" + "".join(f"; test ! -f {b}" for b in bad)
        repo, took, _ = gate_bench._run(
            ctx,
            name,
            gate_bench._tasks(n, sleeps=sleeps, done=ctx.root / f"{name}.done"),
            verify=verify,
            gate="queue",
            batch_max=8,
            ok=(5,) if bad else (0,),
            reruns=2,
            window=window,
        )
        landed = sum(1 for s in gate_bench._landed(repo).values() if s == "MERGED")
        out[window] = (len(log.read_text().splitlines()), landed, took)
    (a_runs, a_landed, a_took), (f_runs, f_landed, f_took) = out["adaptive"], out["fixed"]
    return Figure(
        bench="gate-window",
        config=f"forge run, {n} tasks, {rate:.0%} culprits, batch_max 8: adaptive vs fixed",
        forge=f"{a_runs / max(1, a_landed):.2f} runs a landed task, makespan {secs(a_took)}",
        alternative=f"{f_runs / max(1, f_landed):.2f} runs a landed task, makespan {secs(f_took)}",
        ratio=a_took / f_took,
        target=None,
    )


def run(ctx: Context) -> list[Figure]:
    n = 60 if ctx.quick else 200
    figures = []
    for rate in (0.0, 0.1, 0.3):
        rng = random.Random(int(rate * 100) + 3)
        culprits = {i for i in range(n) if rng.random() < rate}
        fixed = {b: simulate(n, culprits, batch_max=b, adaptive=False) for b in (1, 4, 8)}
        window = simulate(n, culprits, batch_max=8, adaptive=True)
        best = min(fixed, key=lambda b: fixed[b].makespan)
        alt = "; ".join(
            f"batch_max {b}: {r.per_task:.2f} a task, makespan {r.makespan:.0f}"
            for b, r in fixed.items()
        )
        figures.append(
            Figure(
                bench="gate-window",
                config=(
                    f"{n} tasks, {rate:.0%} culprits, {ARRIVALS_PER_RUN} queued per verification "
                    f"time: adaptive window (ceiling 8) vs the best fixed batch_max ({best})"
                ),
                forge=f"{window.per_task:.2f} runs a landed task, makespan {window.makespan:.0f}",
                alternative=alt,
                ratio=window.makespan / fixed[best].makespan,
                target=None,
                note="simulated over the gate's own batch and bisection logic",
            )
        )
    if not ctx.quick:
        figures.append(real(ctx, 0.3))
    return figures
