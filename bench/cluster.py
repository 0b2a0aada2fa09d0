"""cluster: the cost of running attempts on Dask workers instead of local slots.

A plan of 20 independent shell tasks (each writes one file) on a 1,000-file
repository, max_parallel 2, run once with local slots and once with
`--cluster local:2` (two worker processes on this machine, reaching the
repository through a bare git remote). The figure is the cluster path's own cost
per task: the mean attempt time on a worker (publish the start commit, submit,
fetch into the worker's mirror, move its slot, run, commit, push, fetch the
result back) against the mean attempt time in a local slot. Starting and stopping
the LocalCluster (~2-3 s, paid once per run) is reported apart.

Below the table, an estimate on paper for 200 tasks on 10 workers, from the
figures measured here: where the coordinator's merges and verification become
the bottleneck, and what batching in the gate does to it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import repogen
from kit import Context, Figure, forge, ms, secs, settle, stopwatch

TASKS = 20
GOAL = 0.5  # seconds of the cluster path's own cost per task


def _plan(root: Path, name: str, n: int) -> Path:
    lines = [f'name = "{name}"', "max_parallel = 2", ""]
    for i in range(n):
        lines += [
            "[[task]]",
            f'id = "t{i}"',
            f'run = "mkdir -p out && echo {i} > out/t{i}.txt"',
            f'files = ["out/t{i}.txt"]',
            "",
        ]
    path = root / f"{name}.toml"
    path.write_text("\n".join(lines))
    return path


def _state(repo: Path, plan: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (repo / ".git" / "forge" / "plans" / plan / "state.json").read_text()
    )
    if {t["status"] for t in data["tasks"].values()} != {"MERGED"}:
        raise RuntimeError(f"cluster bench plan {plan} did not merge every task")
    return data


def _attempt_times(state: dict[str, Any]) -> list[float]:
    return sorted(a["duration"] for t in state["tasks"].values() for a in t["attempts"])


def run(ctx: Context) -> list[Figure]:
    try:
        import distributed  # noqa: F401
    except ImportError:
        ctx.log("  cluster: skipped (pip install 'forge[cluster]')")
        return []
    n = 10 if ctx.quick else TASKS
    repo = repogen.repo(ctx, 1000)
    walls: dict[str, float] = {}
    means: dict[str, float] = {}
    for name, args in (("local", ()), ("cluster", ("--cluster", "local:2"))):
        plan = _plan(ctx.tmp(f"plan-{name}"), f"bench-{name}", n)
        forge(repo, "plan", str(plan))
        settle()
        with stopwatch() as t:
            forge(repo, "run", f"bench-{name}", *args)
        state = _state(repo, f"bench-{name}")
        walls[name] = t[0]
        times = _attempt_times(state)
        means[name] = statistics.median(times)
        mean = sum(times) / len(times)
        ctx.log(
            f"  {name}: wall {secs(t[0])}, attempt median {ms(means[name])}, mean {ms(mean)} "
            f"(slowest {ms(times[-1])}: a new slot or worker cache)"
        )
    per_task = means["cluster"] - means["local"]
    inner_cluster = walls["cluster"] - walls["local"]
    ctx.log(
        f"  cluster path: {ms(per_task)} more per attempt; run wall +{secs(inner_cluster)} "
        "(includes starting and stopping the LocalCluster)"
    )
    ctx.log(paper_estimate(per_task=max(per_task, 0.0) + means["local"]))
    return [
        Figure(
            bench="cluster",
            config=f"{n} shell tasks, local:2 vs local slots, max_parallel 2",
            forge=f"{ms(means['cluster'])} per attempt (median)",
            alternative=f"{ms(means['local'])} (local slot)",
            ratio=means["cluster"] / means["local"],
            target=None,
            note=(
                f"the cluster path's own cost: {ms(per_task)} per task (goal < {GOAL} s); "
                f"whole run {secs(walls['cluster'])} vs {secs(walls['local'])} locally, "
                "the difference being mostly the LocalCluster's start and stop"
            ),
            seconds=per_task,
            max_seconds=GOAL,
        )
    ]


def paper_estimate(*, per_task: float, merge: float = 0.015, verify: float = 60.0) -> str:
    """200 tasks on 10 workers, each attempt 10 min of agent time: what limits the run."""
    tasks, workers, agent = 200, 10, 600.0
    waves = tasks / workers
    work = waves * (agent + per_task)
    lines = [
        "  estimate on paper, 200 tasks on 10 workers, 10 min per attempt, "
        f"a {verify:.0f} s verification:",
        f"    the workers need {secs(work)} of wall time ({waves:.0f} rounds of {workers});",
        f"    merges {secs(tasks * merge)} in all (plumbing, one at a time): never the limit;",
    ]
    for batch in (1, 4, 8):
        gate = tasks / batch * verify
        limit = "the bottleneck" if gate > 0.9 * work else "keeps up"
        lines.append(
            f"    gate with batches of {batch}: {tasks // batch} verifications, "
            f"{secs(gate)} of verification: {limit}"
        )
    lines.append(
        "    so with a minute-long verification a gate of single-task batches is as slow as "
        "the workers themselves and batches of 4 or more leave it far behind them; the "
        "merges and the cluster path's own cost are noise beside 10-minute attempts."
    )
    return "\n".join(lines)
