"""flaky: the gate on a real pytest suite with flaky tests, against the same gate
without per-test knowledge.

A generated suite of about 500 tests (ten files of fifty, a module each checks),
three of them flaky: they fail 10 %, 30 % and 50 % of their runs, from a seeded
sequence (a counter per test outside the repository), so the run is reproducible.
A plan of 100 tasks (20 with --quick): 5 % are culprits (each breaks the one test
that checks its module), the others write a note. Two runs of the same plan, each
in a repository of its own:

- forge as it ships: `quarantine = "auto"`, `gate_on = "regressions"`, the lane a
  plain pytest command (so confirming reruns and bisection run the failing tests only);
- the gate without per-test knowledge: `quarantine = "off"`, `gate_on = "green"` and
  a command forge cannot run a subset of (`cd . && ...`: every step runs the whole
  suite), as a gate judged by one run's exit code does.

The suite's conftest logs every pytest session (tests executed, CPU of the process,
start and end), so test executions and verification CPU are counted from inside.
Figures: innocent tasks blamed per 100 landed (goal 0), culprits missed (goal 0),
test executions and verification CPU per landed task against the gate without
per-test knowledge (goal <= 0.5x), and the time to name one culprit among 32
(flakes off) against one whole-suite run plus the failing test's reruns.
"""

from __future__ import annotations

import json
import math
import random
import shlex
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kit import REGRESSION, Context, Figure, forge, git, secs

from plans import BenchPlan, BenchTask

FILES = 10  # test files, a module each
FLAKY = {"flaky_10": 0.10, "flaky_30": 0.30, "flaky_50": 0.50}
SEED = 32
TARGET = 0.5  # forge's test executions and CPU a landed task over the baseline's

CONFTEST = """
import json, os, resource, time

_ran = 0


def _born():
    # when this process started (pytest's own start-up included), in epoch seconds
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return time.time() - (up - ticks / os.sysconf("SC_CLK_TCK"))


_start = _born()


def pytest_runtest_logreport(report):
    global _ran
    if report.when == "call":
        _ran += 1


def pytest_sessionfinish(session, exitstatus):
    use = resource.getrusage(resource.RUSAGE_SELF)
    line = {"tests": _ran, "collected": session.testscollected, "exit": int(exitstatus),
            "cpu": use.ru_utime + use.ru_stime, "start": _start, "end": time.time()}
    with open(os.path.join(os.environ["FLAKY_DIR"], "runs.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\\n")
"""

FLAKY_TESTS = """
import fcntl, os, random


def _fails(name, rate):
    if os.environ.get("FLAKY_OFF"):
        return False
    with open(os.path.join(os.environ["FLAKY_DIR"], name), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = len(f.read())
        f.write("x")
    return random.Random(f"{SEED}-{name}-{n}").random() < rate
"""


def _suite(repo: Path, per_file: int) -> int:
    """Write the package and its tests; the number of tests."""
    (repo / "pkg").mkdir()
    (repo / "tests").mkdir()
    (repo / "notes").mkdir()
    (repo / "notes" / "README").write_text("notes\n")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "conftest.py").write_text(CONFTEST.lstrip())
    for f in range(FILES):
        (repo / "pkg" / f"m{f}.py").write_text("VALUE = 1\n")
        body = [f"from pkg import m{f}\n", f"\ndef test_value_{f}():\n    assert m{f}.VALUE == 1\n"]
        body += [
            f"\ndef test_{f}_{t}():\n    assert {t} + 1 == {t + 1}\n" for t in range(per_file - 1)
        ]
        (repo / "tests" / f"test_s{f}.py").write_text("".join(body))
    flaky = [FLAKY_TESTS.lstrip().replace("{SEED}", str(SEED))]
    for name, rate in FLAKY.items():
        flaky.append(f'\n\ndef test_{name}():\n    assert not _fails("{name}", {rate})\n')
    (repo / "tests" / "test_flaky.py").write_text("".join(flaky))
    return FILES * per_file + len(FLAKY)


def _repo(ctx: Context, tag: str, per_file: int) -> tuple[Path, int]:
    # Named after its side: each side's folder under FORGE_WORKTREES is then
    # `<root>/repo-<side>` (two of one name get a folder each, the second's hashed).
    repo = ctx.tmp(f"flaky-{tag}") / f"repo-{tag}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    tests = _suite(repo, per_file)
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a suite with flaky tests")
    return repo, tests


def _tasks(n: int, culprits: set[int]) -> list[BenchTask]:
    tasks = []
    for i in range(n):
        if i in culprits:
            module = f"pkg/m{sorted(culprits).index(i) % FILES}.py"
            tasks.append(
                BenchTask(id=f"t{i:03d}", run=f"echo 'VALUE = 2' > {module}", files=(module,))
            )
        else:
            note = f"notes/t{i:03d}.txt"
            tasks.append(BenchTask(id=f"t{i:03d}", run=f"echo 'note {i}' > {note}", files=(note,)))
    return tasks


def _command(state: Path, *, knows_tests: bool, flakes: bool = True) -> str:
    # pytest without the plugins installed beside it (half its start-up on this machine)
    env = ["env", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", f"FLAKY_DIR={state}"]
    env += [] if flakes else ["FLAKY_OFF=1"]
    cmd = shlex.join(
        [*env, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    )
    return cmd if knows_tests else f"cd . && {cmd}"


@dataclass(frozen=True)
class Outcome:
    landed: int
    innocents_blamed: int
    culprits_missed: int
    other: dict[str, int]  # statuses neither landed nor blamed
    executions: int
    cpu: float
    runs: list[dict[str, float]]
    wall: float
    exit: int

    def per_landed(self, value: float) -> float:
        return value / max(1, self.landed)


def _run(
    ctx: Context,
    tag: str,
    n: int,
    culprits: set[int],
    *,
    per_file: int,
    knows_tests: bool,
    flakes: bool = True,
    extra: dict[str, str] | None = None,
) -> Outcome:
    repo, _ = _repo(ctx, tag, per_file)
    state = ctx.tmp(f"flaky-{tag}-state")
    settings = {"max_parallel": "4"} | (extra or {})
    if knows_tests:
        settings |= {"quarantine": '"auto"', "gate_on": '"regressions"'}
    else:
        settings |= {"quarantine": '"off"', "gate_on": '"green"'}
    plan = BenchPlan(
        name=f"flaky-{tag}",
        tasks=_tasks(n, culprits),
        max_parallel=4,
        verify=_command(state, knows_tests=knows_tests, flakes=flakes),
        extra={k: v for k, v in settings.items() if k != "max_parallel"},
    )
    path = plan.write(ctx.tmp(f"plan-flaky-{tag}"))
    forge(repo, "plan", str(path))
    t0 = time.perf_counter()
    cp = forge(repo, "run", plan.name, ok=range(0, 10), timeout=1800)
    wall = time.perf_counter() - t0
    st = json.loads((repo / ".git" / "forge" / "plans" / plan.name / "state.json").read_text())
    status = {tid: t["status"] for tid, t in st["tasks"].items()}
    ids = {f"t{i:03d}" for i in culprits}
    landed = sum(1 for s in status.values() if s == "MERGED")
    blamed = sum(1 for tid, s in status.items() if s == "FAILED" and tid not in ids)
    missed = sum(1 for tid in ids if status.get(tid) != "FAILED")
    other: dict[str, int] = {}
    for s in status.values():
        if s not in ("MERGED", "FAILED"):
            other[s] = other.get(s, 0) + 1
    log = state / "runs.jsonl"
    runs = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return Outcome(
        landed,
        blamed,
        missed,
        other,
        sum(int(r["tests"]) for r in runs),
        sum(float(r["cpu"]) for r in runs),
        runs,
        wall,
        cp.returncode,
    )


def _said(o: Outcome) -> str:
    rest = "".join(f", {v} {k}" for k, v in sorted(o.other.items()))
    return (
        f"{o.landed} landed, {o.innocents_blamed} innocents blamed, {o.culprits_missed} "
        f"culprits missed{rest}; {len(o.runs)} pytest runs, {o.executions} test executions, "
        f"{o.cpu:.1f} s CPU; {secs(o.wall)} (exit {o.exit})"
    )


def _naming(ctx: Context, n: int, per_file: int, whole_tests: int) -> Figure:
    """One culprit among n, flakes off, all n in one batch: from the first whole-suite
    run's start to the end of the last subset run before the next whole-suite run."""
    got = _run(
        ctx,
        f"name-{n}",
        n,
        {n // 2},
        per_file=per_file,
        knows_tests=True,
        flakes=False,
        extra={"gate": '"end"', "batch_max": str(n), "batch_window": '"fixed"'},
    )
    if got.culprits_missed or got.innocents_blamed:
        raise RuntimeError(f"naming one culprit among {n}: {_said(got)}")
    runs = sorted(got.runs, key=lambda r: r["start"])
    whole = [i for i, r in enumerate(runs) if r["collected"] >= whole_tests]
    first = whole[0]
    nxt = next((i for i in whole if i > first), len(runs))
    subsets = runs[first + 1 : nxt]
    took = (subsets[-1]["end"] if subsets else runs[first]["end"]) - runs[first]["start"]
    whole_s = runs[first]["end"] - runs[first]["start"]
    sub_s = statistics.median(r["end"] - r["start"] for r in subsets) if subsets else 0.0
    busy = sum(r["end"] - r["start"] for r in runs[first:nxt])
    allowed = 2 + math.ceil(math.log2(n))  # k = 1 failing test
    bound = whole_s + allowed * sub_s
    return Figure(
        bench="flaky",
        config=f"time to name one culprit among {n} ({whole_tests} tests, one broken)",
        forge=f"{secs(took)}: 1 whole-suite run + {len(subsets)} subset runs "
        f"({sum(int(r['tests']) for r in subsets)} test executions)",
        alternative=f"{secs(bound)}: one whole-suite run ({secs(whole_s)}) + {allowed} "
        f"reruns of the failing test ({secs(sub_s)} each)",
        ratio=took / bound,
        target=1.0,
        kind=REGRESSION,
        note=f"the run: {_said(got)}; whole-suite runs before the culprit was named: "
        f"{sum(1 for i in whole if i < nxt)}; of the {secs(took)}, pytest's processes "
        f"{secs(busy)} and forge between them {secs(took - busy)} "
        f"({secs((took - busy) / max(1, len(subsets)))} a step: merging the prefix, "
        "preparing the checkout, recording the run)",
    )


def _blame_figures(config: str, ours: Outcome, base: Outcome) -> list[Figure]:
    out = []
    for what, mine, theirs in (
        ("innocent tasks blamed per 100 landed", ours.innocents_blamed, base.innocents_blamed),
        ("culprits missed", ours.culprits_missed, base.culprits_missed),
    ):
        per = what.endswith("per 100 landed")
        a = 100 * ours.per_landed(mine) if per else float(mine)
        b = 100 * base.per_landed(theirs) if per else float(theirs)
        out.append(
            Figure(
                bench="flaky",
                config=f"{config}: {what}",
                forge=f"{a:.1f}",
                alternative=f"goal 0 ({b:.1f} without per-test knowledge)",
                ratio=a,
                target=0,
                kind=REGRESSION,
            )
        )
    return out


def run(ctx: Context) -> list[Figure]:
    n, per_file, among = (12, 10, 4) if ctx.quick else (100, 50, 32)
    culprits = set(random.Random(SEED).sample(range(n), max(1, n * 5 // 100)))
    # Both plans at once, each in its own repository: the figures are counts of tests
    # and CPU seconds of the pytest processes, which running side by side leaves alone.
    with ThreadPoolExecutor(2) as pool:
        mine = pool.submit(_run, ctx, "forge", n, culprits, per_file=per_file, knows_tests=True)
        theirs = pool.submit(_run, ctx, "plain", n, culprits, per_file=per_file, knows_tests=False)
        ours, base = mine.result(), theirs.result()
    ctx.log(f"  forge (quarantine auto, regressions, subsets): {_said(ours)}")
    ctx.log(f"  without per-test knowledge: {_said(base)}")
    tests = FILES * per_file + len(FLAKY)
    config = f"{n} tasks, {len(culprits)} culprits, 3 flaky tests (10/30/50 %), {tests} tests"
    figures = _blame_figures(config, ours, base)
    detail = f"forge: {_said(ours)}. Without per-test knowledge: {_said(base)}"
    for what, a, b, unit in (
        (
            "test executions per landed task",
            ours.per_landed(ours.executions),
            base.per_landed(base.executions),
            "{:.0f}",
        ),
        (
            "verification CPU per landed task",
            ours.per_landed(ours.cpu),
            base.per_landed(base.cpu),
            "{:.2f} s",
        ),
    ):
        figures.append(
            Figure(
                bench="flaky",
                config=f"{config}: {what}",
                forge=unit.format(a),
                alternative=unit.format(b) + " (quarantine off, gate_on green, no subset)",
                ratio=a / b if b else 0.0,
                target=TARGET,
                kind=REGRESSION,
                note=detail if "CPU" in what else "",
            )
        )
    figures.append(_naming(ctx, among, per_file, tests))
    return figures
