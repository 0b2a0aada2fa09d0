"""overhead: N no-op shell tasks through `forge plan` + `forge run`, against the
floor: the same git work done by bare git commands.

The floor is what forge cannot avoid: one `git worktree add` per parallel slot,
then for each task a checkout of its branch in a slot, the edit, `add -A` and a
commit (plumbing: write-tree, commit-tree, update-ref), and a merge into an
integration branch (merge-tree, commit-tree, update-ref under a lock). The floor
runs as many workers as forge runs slots, so both get the same parallelism.

Both sides are measured at the same warmth, in ABBA pairs:
- cold: each side of each pair in a fresh copy of the repository (forge finds no
  idle slot of an earlier plan to take over; bare git makes its worktrees);
- warm: each side keeps its places between pairs, forge its slots (a plan takes
  over the idle slots of the one before) and bare git its worktrees, after one
  round that is not measured.
forge's own time inside a run (bench/inside.py) is a regression check: forge
against a bound, not against bare git.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path

import repogen
from kit import (
    ALTERNATIVE,
    REGRESSION,
    Context,
    Figure,
    forge,
    git,
    rounds,
    secs,
    settle,
    spread,
    stopwatch,
)

from plans import BenchPlan, edit_tasks

SLOTS = 2
# forge's cost per task beyond bare git's, as the median of ABBA pairs.
TARGET_EXTRA = 0.050
# forge's own time a task inside a run (a regression check against a bound).
TARGET_OWN = 0.050
PAIRS = 5
# One side of a pair: (wall seconds, CPU seconds of its processes).
Side = tuple[float, float]

# One worker of the floor: its slot (made unless it is kept from an earlier round,
# one worker at a time, as forge makes its slots one at a time),
# then its share of the tasks, one per line as "branch path". Merges are serialised
# with flock, as forge serialises them.
FLOOR_WORKER = r"""
set -euo pipefail
slot=$1; base=$2; integ=$3; lock=$4; tasks=$5
# git's worktree registry does not take adds side by side: one at a time
( flock 8; [ -e "$slot/.git" ] || git worktree add -q --detach "$slot" "$base" ) 8>"$lock.add"
cd "$slot"
while read -r branch path; do
  git checkout -q --force -B "$branch" "$base"
  echo "change" >> "$path"
  git add -A
  tree=$(git write-tree)
  head=$(git rev-parse HEAD)
  commit=$(git commit-tree "$tree" -p "$head" -m "$branch")
  git update-ref "refs/heads/$branch" "$commit" "$head"
  (
    flock 9
    ihead=$(git rev-parse "$integ")
    mtree=$(git merge-tree --write-tree "$ihead" "$commit")
    merge=$(git commit-tree "$mtree" -p "$ihead" -p "$commit" -m "merge $branch")
    git update-ref "$integ" "$merge" "$ihead"
  ) 9>"$lock"
done < "$tasks"
"""


def paths_for(n: int, files: int, *, offset: int = 0) -> list[str]:
    """n distinct files spread over the repository (so tasks touch different folders)."""
    stride = max(1, files // n)
    return [repogen.file_path((offset + i * stride) % files) for i in range(n)]


def floor(
    ctx: Context,
    repo: Path,
    paths: list[str],
    tag: str,
    *,
    slots: int = SLOTS,
    keep: Path | None = None,
    premade: bool = False,
) -> Side:
    """(seconds, CPU seconds) bare git takes for the tasks. `keep`: the folder of
    worktrees kept between rounds (warm), else fresh ones; `premade`: worktrees made
    before the clock starts (a per-task cost without the `worktree add` forge does
    not pay)."""
    work = ctx.tmp(f"floor-{tag}")
    where = keep or work
    base = git(repo, "rev-parse", "HEAD")
    integ = f"refs/heads/floor-{tag}-integration"
    git(repo, "update-ref", integ, base)
    script = work / "worker.sh"
    script.write_text(FLOOR_WORKER)
    lists = []
    for w in range(slots):
        mine = [(f"floor-{tag}/t{i:03d}", p) for i, p in enumerate(paths) if i % slots == w]
        lst = work / f"tasks-{w}.txt"
        lst.write_text("".join(f"{b} {p}\n" for b, p in mine))
        lists.append(lst)
    if premade:
        for w in range(slots):
            if not (where / f"slot-{w}" / ".git").exists():
                git(repo, "worktree", "add", "-q", "--detach", str(where / f"slot-{w}"), base)
    settle()
    with stopwatch() as t:
        procs = [
            subprocess.Popen(
                [
                    "bash",
                    str(script),
                    str(where / f"slot-{w}"),
                    base,
                    integ,
                    str(work / "merge.lock"),
                    str(lists[w]),
                ],
                cwd=repo,
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for w in range(slots)
        ]
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"floor worker exited {p.returncode}: {err}")
    merged = git(repo, "rev-list", "--count", "--merges", f"{base}..{integ}")
    if int(merged) != len(paths):
        raise RuntimeError(f"floor merged {merged} of {len(paths)} tasks")
    return t[0], t[1]


def through_forge(ctx: Context, repo: Path, paths: list[str], tag: str) -> Side:
    """(seconds, CPU seconds) of `forge plan` + `forge run`: both processes and
    everything they ran."""
    name = f"ovh-{tag}"
    plan = BenchPlan(name=name, tasks=edit_tasks(len(paths), paths), max_parallel=SLOTS)
    path = plan.write(ctx.tmp(f"plan-{tag}"))
    settle()
    with stopwatch() as tp:
        forge(repo, "plan", str(path))
    with stopwatch() as tr:
        forge(repo, "run", name)
    state = json.loads((repo / ".git" / "forge" / "plans" / name / "state.json").read_text())
    statuses = {t["status"] for t in state["tasks"].values()}
    if statuses != {"MERGED"}:
        raise RuntimeError(f"forge run left tasks {statuses}")
    return tp[0] + tr[0], tp[1] + tr[1]


def inside(files: int, n: int) -> dict[str, float]:
    """forge's own time per task, from inside a run (bench/inside.py, a process of its own)."""
    cp = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("inside.py")),
            "--files",
            str(files),
            "--tasks",
            str(n),
            "--parallel",
            str(SLOTS),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if cp.returncode != 0:
        raise RuntimeError(f"inside.py exited {cp.returncode}: {cp.stderr[-2000:]}")
    data: dict[str, float] = json.loads(cp.stdout.strip().splitlines()[-1])
    return data


def _pairs(
    ctx: Context, source: Path, files: int, n: int, pairs: int, *, cold: bool
) -> list[tuple[Side, Side]]:
    """(bare git, forge: plan + run) (seconds, CPU seconds) of each measured pair at one
    warmth (kit.rounds: a fresh copy for each side of each cold pair; warm, both keep
    theirs)."""
    warmth = "cold" if cold else "warm"
    out = []
    for rnd in rounds(ctx, source, f"ovh-{files}", pairs, cold=cold):
        tag = f"{warmth}-{files}-{rnd.index + 1}"
        paths = paths_for(n, files, offset=2 + 2 * rnd.index + (0 if cold else 100))
        fl, fo = rnd.run(
            partial(floor, ctx, rnd.repos[0], paths, tag, keep=rnd.kept),
            partial(through_forge, ctx, rnd.repos[1], paths, tag),
        )
        if rnd.measured:
            out.append((fl, fo))
            ctx.log(
                f"  {files} files, {warmth} pair {rnd.index + 1} ({rnd.order}): {_said(fl, fo, n)}"
            )
    return out


def _said(fl: Side, fo: Side, n: int) -> str:
    return (
        f"bare git {secs(fl[0])}, forge {secs(fo[0])}: {1000 * (fo[0] - fl[0]) / n:+.0f} ms "
        f"a task (CPU {secs(fl[1])} and {secs(fo[1])}: {1000 * (fo[1] - fl[1]) / n:+.0f} ms)"
    )


def _figure(files: int, n: int, warmth: str, got: list[tuple[Side, Side]]) -> Figure:
    extra = [(fo - fl) / n for (fl, _), (fo, _) in got]
    ratios = [fo / fl for (fl, _), (fo, _) in got]
    med = statistics.median(extra)
    return Figure(
        bench="overhead",
        config=f"{files // 1000}k files, {n} tasks, {SLOTS} slots, {warmth}",
        forge=f"{1000 * med:+.0f} ms/task beyond bare git",
        alternative=f"bare git, {warmth} ({len(got)} ABBA pairs)",
        ratio=statistics.median(ratios),
        target=None,
        seconds=med,
        max_seconds=TARGET_EXTRA,
        kind=ALTERNATIVE,
        note=(
            f"{warmth}: median of {len(got)} ABBA pairs {spread(extra, 1000)} ms a task; "
            f"wall ratio {spread(ratios, 1, '{:.2f}')}"
            + (
                "; a fresh copy of the repository for each side of each pair"
                if warmth == "cold"
                else "; forge takes over its earlier plan's idle slots, bare git keeps its "
                "worktrees"
            )
        ),
    )


def _cpu_figure(files: int, n: int, warmth: str, got: list[tuple[Side, Side]]) -> Figure:
    """The same pairs in CPU time: what each side's processes computed (user + system,
    every git and forge process included), apart from the time they waited for the
    disk. At 10k and 50k files cold the wall clock of the same work swings by seconds
    from one pair (and one run) to the next with the file system; the CPU says how
    much of a difference is work forge does."""
    extra = [(fo - fl) / n for (_, fl), (_, fo) in got]
    ratios = [fo / fl for (_, fl), (_, fo) in got]
    med = statistics.median(extra)
    floor_cpu = statistics.median(fl for (_, fl), _ in got) / n
    return Figure(
        bench="overhead",
        config=f"{files // 1000}k files, {n} tasks, {SLOTS} slots, {warmth}: CPU",
        forge=f"{1000 * med:+.0f} ms/task of CPU beyond bare git",
        alternative=f"bare git's {1000 * floor_cpu:.0f} ms/task, {warmth} (the same pairs)",
        ratio=statistics.median(ratios),
        target=None,
        kind=ALTERNATIVE,
        note=(
            f"CPU (user + system of every process of each side) beyond bare git's, median "
            f"of the {len(got)} pairs above {spread(extra, 1000)} ms a task: no target "
            "(the goal is on the wall clock), it tells forge's own work from waiting"
        ),
    )


def run(ctx: Context) -> list[Figure]:
    sizes = [(1000, 4)] if ctx.quick else [(1000, 20), (10_000, 20), (50_000, 20)]
    pairs = 2 if ctx.quick else PAIRS
    figures = []
    for files, n in sizes:
        source = repogen.repo(ctx, files)
        cold = _pairs(ctx, source, files, n, pairs, cold=True)
        warm = _pairs(ctx, source, files, n, pairs, cold=False)
        figures += [_figure(files, n, "cold", cold), _figure(files, n, "warm", warm)]
        figures += [_cpu_figure(files, n, "cold", cold), _cpu_figure(files, n, "warm", warm)]
        own = inside(files, n)
        figures.append(
            Figure(
                bench="overhead",
                config=f"{files // 1000}k files, {n} tasks: forge's own time inside a run",
                forge=f"{1000 * own['own_per_task_s']:.0f} ms a task",
                alternative=f"bound {1000 * TARGET_OWN:.0f} ms a task",
                ratio=own["own_per_task_s"] / TARGET_OWN,
                target=None,
                seconds=own["own_per_task_s"],
                max_seconds=TARGET_OWN,
                kind=REGRESSION,
                note=(
                    f"Python {1000 * own['python_cpu_per_task_s']:.0f} ms CPU + git calls the "
                    f"floor does not make {1000 * own['extra_git_per_task_s']:.0f} ms; "
                    f"{own['git_calls_per_task']:.1f} git calls a task"
                ),
            )
        )
    return figures
