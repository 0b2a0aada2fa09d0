"""flaky-seeds: the gate over several seeds of the flaky corpus (bench/flaky.py), in
two harder cases, counting what the gate really ran.

- red: one test fails on main (it checks a file no task writes): it must never be
  put in a culprit's reason nor blame an innocent;
- polluters: two of the culprits are order-dependent polluters (each adds a test
  that sets another module's global, so that module's own test fails in the whole
  run and passes alone): each must be blamed, never called flaky.

Each seed draws other culprits and another flake sequence. Figures: innocents blamed
at the end and at any point (a FAILED attempt of a task that is no culprit; goal 0
and 0), culprits landed (goal 0), whole-suite runs per culprit (red: goal <= 2;
polluters: <= 2 + ceil(log2 N) for the batch of N they were found in, measured as
the whole runs of the batches that named a culprit) and whole-suite runs per landed
task. A batch with no culprit costs one whole run, which passes: a culprit's whole
runs are counted as the whole runs that failed (its batch's, a repeat, a step of a
bisection by whole runs). Regression checks: forge against fixed bounds.
"""

from __future__ import annotations

import json
import math
import random
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from flaky import FILES, FLAKY, _suite
from kit import REGRESSION, Context, Figure, forge, git, secs

from plans import BenchPlan, BenchTask

RED = "\n\ndef test_red_on_main():\n    import pathlib\n    assert pathlib.Path('notes/fixed').exists()\n"


@dataclass(frozen=True)
class Seeded:
    landed: int
    blamed_end: int  # innocents FAILED at the end
    blamed_ever: int  # innocents with any FAILED attempt, or a blame given back
    culprits_landed: int
    polluters_named: int  # polluters blamed as order-dependent
    whole_runs: int
    whole_per_culprit: float  # whole runs that failed, per culprit
    wall: float


def _repo(ctx: Context, tag: str, per_file: int, *, red: bool, seed: int) -> Path:
    repo = ctx.tmp(f"seeds-{tag}") / f"repo-{tag}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    _suite(repo, per_file)
    flaky = repo / "tests" / "test_flaky.py"
    flaky.write_text(
        flaky.read_text().replace("-{name}-", f"-{seed}-{{name}}-") + (RED if red else "")
    )
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a suite with flaky tests")
    return repo


def _tasks(n: int, culprits: list[int], polluters: list[int]) -> list[BenchTask]:
    out = []
    for i in range(n):
        tid = f"t{i:03d}"
        if i in polluters:
            f = polluters.index(i) % FILES
            test = f"tests/test_p{f}.py"  # (before tests/test_s*.py in pytest's order)
            body = f"from pkg import m{f}\\n\\n\\ndef test_pollute_{f}():\\n    m{f}.VALUE = 2\\n"
            out.append(BenchTask(id=tid, run=f"printf '{body}' > {test}", files=(test,)))
        elif i in culprits:
            module = f"pkg/m{culprits.index(i) % FILES}.py"
            out.append(BenchTask(id=tid, run=f"echo 'VALUE = 2' > {module}", files=(module,)))
        else:
            note = f"notes/t{i:03d}.txt"
            out.append(BenchTask(id=tid, run=f"echo 'note {i}' > {note}", files=(note,)))
    return out


def _one(ctx: Context, case: str, seed: int, n: int, per_file: int) -> Seeded:
    tag = f"{case}-{seed}"
    repo = _repo(ctx, tag, per_file, red=case == "red", seed=seed)
    state = ctx.tmp(f"seeds-{tag}-state")
    pick = random.Random(seed).sample(range(n), max(2, n * 5 // 100))
    polluters = pick[:2] if case == "polluters" else []
    culprits = [i for i in pick if i not in polluters]
    env = ["env", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", f"FLAKY_DIR={state}"]
    cmd = shlex.join(
        [*env, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    )
    plan = BenchPlan(
        name=f"seeds-{tag}", tasks=_tasks(n, culprits, polluters), max_parallel=4, verify=cmd
    )
    forge(repo, "plan", str(plan.write(ctx.tmp(f"plan-seeds-{tag}"))))
    t0 = time.perf_counter()
    forge(repo, "run", plan.name, ok=range(0, 10), timeout=3600)
    wall = time.perf_counter() - t0
    st = json.loads((repo / ".git" / "forge" / "plans" / plan.name / "state.json").read_text())
    bad = {f"t{i:03d}" for i in pick}
    tasks = st["tasks"]
    landed = sum(1 for t in tasks.values() if t["status"] == "MERGED")
    blamed_end = sum(1 for tid, t in tasks.items() if t["status"] == "FAILED" and tid not in bad)
    ever = sum(
        1
        for tid, t in tasks.items()
        if tid not in bad
        and (
            any(a["status"] == "FAILED" for a in t["attempts"])
            or any(w.startswith("blame cleared") for w in t.get("warnings", []))
        )
    )
    culprits_landed = sum(1 for tid in bad if tasks[tid]["status"] == "MERGED")
    named = sum(
        1 for i in polluters if "order-dependent" in (tasks[f"t{i:03d}"].get("reason") or "")
    )
    log = state / "runs.jsonl"
    runs = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    tests = FILES * per_file + len(FLAKY) + (1 if case == "red" else 0)
    whole = [r for r in runs if r["collected"] >= tests - 4]
    # A batch without a culprit costs one whole run, which passes: the whole runs a
    # culprit costs are those that failed (its batch's, a repeat, a bisection's).
    failed = sum(1 for r in whole if r["exit"] != 0)
    return Seeded(
        landed,
        blamed_end,
        ever,
        culprits_landed,
        named,
        len(whole),
        failed / max(1, len(pick)),
        wall,
    )


def run(ctx: Context) -> list[Figure]:
    n, per_file, seeds = (16, 10, 5) if ctx.quick else (40, 20, 5)
    figures = []
    for case in ("red", "polluters"):
        got = [_one(ctx, case, seed, n, per_file) for seed in range(1, seeds + 1)]
        for g in got:
            ctx.log(f"  {case}: {g}")
        said = (
            f"{seeds} seeds of {n} tasks ({max(2, n * 5 // 100)} culprits"
            + (
                ", 2 of them order-dependent polluters"
                if case == "polluters"
                else ", a test red on main"
            )
            + f", 3 flaky tests), {FILES * per_file + len(FLAKY)} tests"
        )
        whole = sum(g.whole_runs for g in got) / max(1, sum(g.landed for g in got))
        bound = 2.0 if case == "red" else 2 + math.ceil(math.log2(n))
        for what, value, target in (
            ("innocents blamed at the end", sum(g.blamed_end for g in got), 0.0),
            ("innocents blamed at any point", sum(g.blamed_ever for g in got), 0.0),
            ("culprits landed", sum(g.culprits_landed for g in got), 0.0),
            (
                "failing whole-suite runs per culprit (at most, over the seeds)",
                max(g.whole_per_culprit for g in got),
                bound,
            ),
        ):
            figures.append(
                Figure(
                    bench="flaky-seeds",
                    config=f"{case}: {said}: {what}",
                    forge=f"{value:g}",
                    alternative=f"goal {'<= ' if target else ''}{target:g}",
                    ratio=float(value),
                    target=target,
                    kind=REGRESSION,
                )
            )
        note = "; ".join(
            f"seed {i + 1}: {g.landed} landed, {g.whole_runs} whole runs, {secs(g.wall)}"
            + (
                f", polluters named order-dependent: {g.polluters_named}/2"
                if case == "polluters"
                else ""
            )
            for i, g in enumerate(got)
        )
        figures.append(
            Figure(
                bench="flaky-seeds",
                config=f"{case}: {said}: whole-suite runs per landed task",
                forge=f"{whole:.2f}",
                alternative="informational (the gate's runs, counted by the suite's conftest)",
                ratio=whole,
                target=None,
                kind=REGRESSION,
                note=note,
            )
        )
    return figures
