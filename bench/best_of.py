"""best-of: when running three candidates of a task at once pays.

Scripted agents whose attempts succeed with probability p (0.3, 0.6, 0.9) and take
a duration drawn from a skewed distribution (lognormal: most are quick, a few are
very slow); a failed attempt writes work the task's check rejects. The same plan
runs as best-of-3 (`select = "first"`: the first candidate to pass lands, the
others are stopped) and as one attempt at a time with `--retry-failed 2` (up to
three tries each, one after another), both with `max_parallel = 3`.

Figures: the makespan, tasks landed, and the cost per landed task. Cost is agent
time (each attempt's agent phase, at $0.01 a second, the stopped candidates'
included): a killed CLI never prints its bill, so reported USD would leave the
losers out, which is exactly what must not be left out.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from kit import Context, Figure, forge, git, secs, settle

RATE = 0.01  # USD per agent second

AGENT = r"""
import hashlib, os, random, sys, time
p, median, seed, name = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
key = f"{seed}:{os.environ['FORGE_TASK']}:{os.environ['FORGE_ATTEMPT']}"
rng = random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:12], 16))
ok = rng.random() < p
time.sleep(min(median * rng.lognormvariate(0.0, 0.9), 12 * median))
with open(name, "w") as fh:
    fh.write(("done" if ok else "fail") + f" {key}\n")
"""


def _repo(work: Path) -> Path:
    repo = work / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("best-of bench\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def _plan(name: str, n: int, *, p: float, median: float, agent: Path, best_of: int) -> str:
    q = json.dumps
    command = [sys.executable, str(agent), f"{p:g}", f"{median:g}", name, "{task}.txt"]
    lines = [
        f"name = {q(name)}",
        "max_parallel = 3",
        'agent = "scripted"',
        "escalate_after = 0",
        f"[agents.scripted]\ncommand = {q(command)}",
    ]
    if best_of > 1:
        lines.insert(2, f"best_of = {best_of}")
    for i in range(n):
        tid = f"t{i:02d}"
        lines += [
            "",
            "[[task]]",
            f"id = {q(tid)}",
            'prompt = "write your file"',
            # a candidate writes its unit's file (t00+2.txt): any t00*.txt is the task's
            f"files = [{q(tid + '*.txt')}]",
            f"check = {q('! grep -q fail ' + tid + '*.txt')}",
        ]
    return "\n".join(lines) + "\n"


def _agent_seconds(attempt: dict[str, Any]) -> float:
    return sum(
        float((ph.get("end") or ph["start"]) - ph["start"])
        for ph in attempt.get("phases", [])
        if ph["name"] == "agent"
    )


def _measure(repo: Path) -> tuple[int, float]:
    """(tasks landed, agent seconds spent), every candidate's included."""
    (state,) = (repo / ".git/forge/plans").glob("*/state.json")
    data = json.loads(state.read_text())
    landed, seconds = 0, 0.0
    for ts in data["tasks"].values():
        landed += ts["status"] == "MERGED"
        cands = ts.get("candidates") or {}
        # (a best-of-N task's own attempts land a candidate's work: not counted twice)
        attempts = [a for c in cands.values() for a in c["attempts"]] if cands else ts["attempts"]
        seconds += sum(_agent_seconds(a) for a in attempts)
    return landed, seconds


def _run(ctx: Context, name: str, plan_text: str, *args: str) -> tuple[float, int, float]:
    work = ctx.tmp(name)
    repo = _repo(work)
    plan = work / f"{name}.toml"
    plan.write_text(plan_text)
    forge(repo, "plan", str(plan))
    settle()
    t0 = time.perf_counter()
    forge(repo, "run", name, *args, ok=(0, 5))
    took = time.perf_counter() - t0
    landed, seconds = _measure(repo)
    return took, landed, seconds


def run(ctx: Context) -> list[Figure]:
    n = 4 if ctx.quick else 9
    median = 0.3 if ctx.quick else 0.6
    agent = ctx.root / "scripted_agent.py"
    agent.write_text(AGENT)
    out = []
    for p in (0.3, 0.6, 0.9):
        tag = f"{int(p * 100)}"
        best = _run(
            ctx,
            f"best3-{tag}",
            _plan(f"best3-{tag}", n, p=p, median=median, agent=agent, best_of=3),
        )
        one = _run(
            ctx,
            f"retry2-{tag}",
            _plan(f"retry2-{tag}", n, p=p, median=median, agent=agent, best_of=1),
            "--retry-failed",
            "2",
        )
        (b_took, b_landed, b_secs), (o_took, o_landed, o_secs) = best, one
        b_cost = b_secs * RATE / max(b_landed, 1)
        o_cost = o_secs * RATE / max(o_landed, 1)
        config = f"p={p:g}, {n} tasks, median {median:g} s (lognormal), 3 at once"
        out += [
            Figure(
                bench="best-of",
                config=f"makespan, {config}: best-of-3 (first) vs one attempt, --retry-failed 2",
                forge=f"{secs(b_took)} ({b_landed}/{n} landed)",
                alternative=f"{secs(o_took)} ({o_landed}/{n} landed)",
                ratio=b_took / o_took,
                target=None,
            ),
            Figure(
                bench="best-of",
                config=f"cost per landed task, {config}",
                forge=f"${b_cost:.4f}",
                alternative=f"${o_cost:.4f}",
                ratio=b_cost / o_cost if o_cost else float("inf"),
                target=None,
                note="agent time at $0.01/s, stopped candidates included",
            ),
        ]
    return out
