"""overhead: N no-op shell tasks through `forge plan` + `forge run`, against the
floor: the same git work done by bare git commands.

The floor is what forge cannot avoid: one `git worktree add` per parallel slot,
then for each task a checkout of its branch in a slot, the edit, `add -A` and a
commit (plumbing: write-tree, commit-tree, update-ref), and a merge into an
integration branch (merge-tree, commit-tree, update-ref under a lock). The floor
runs as many workers as forge runs slots, so both get the same parallelism.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import repogen
from kit import Context, Figure, forge, git, secs, settle, stopwatch

from plans import BenchPlan, edit_tasks

SLOTS = 2
# forge's cost per task beyond bare git's, as the median of interleaved pairs.
TARGET_EXTRA = 0.050
PAIRS = 5

# One worker of the floor: its slot, then its share of the tasks, one per line as
# "branch path". Merges are serialised with flock, as forge serialises them.
FLOOR_WORKER = r"""
set -euo pipefail
slot=$1; base=$2; integ=$3; lock=$4; tasks=$5
git worktree add -q --detach "$slot" "$base"
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


def floor(ctx: Context, repo: Path, paths: list[str], tag: str, *, slots: int = SLOTS) -> float:
    work = ctx.tmp(f"floor-{tag}")
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
    settle()
    with stopwatch() as t:
        procs = [
            subprocess.Popen(
                [
                    "bash",
                    str(script),
                    str(work / f"slot-{w}"),
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
    return t[0]


def through_forge(
    ctx: Context, repo: Path, paths: list[str], tag: str
) -> tuple[float, float, float]:
    """(plan seconds, run seconds, forge's own recorded wall time of the run)."""
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
    return tp[0], tr[0], float(state.get("wall_seconds") or 0.0)


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


def run(ctx: Context) -> list[Figure]:
    sizes = [(1000, 6)] if ctx.quick else [(1000, 20), (10_000, 20), (50_000, 20)]
    pairs = 2 if ctx.quick else PAIRS
    figures = []
    for files, n in sizes:
        repo = repogen.repo(ctx, files)
        # Interleaved pairs (floor, forge, floor, forge, ...): the machine's drift hits
        # both sides of a pair alike, and the median of the per-pair figure holds still.
        extra: list[float] = []
        ratios: list[float] = []
        for rep in range(pairs):
            tag = f"{files}-{rep}"
            # Distinct files for every run, so none finds another's work merged.
            fl = floor(ctx, repo, paths_for(n, files, offset=1 + 2 * rep), tag)
            plan_s, run_s, inner = through_forge(
                ctx, repo, paths_for(n, files, offset=2 + 2 * rep), tag
            )
            extra.append((plan_s + run_s - fl) / n)
            ratios.append((plan_s + run_s) / fl)
            ctx.log(
                f"  {files} files, {n} tasks, pair {rep + 1}: forge plan {secs(plan_s)} + run "
                f"{secs(run_s)} (inside the run: {secs(inner)}); floor {secs(fl)}; "
                f"{1000 * extra[-1]:+.0f} ms a task"
            )
        own = inside(files, n)
        med = statistics.median(extra)
        figures.append(
            Figure(
                bench="overhead",
                config=f"{files // 1000}k files, {n} tasks, {SLOTS} slots",
                forge=f"{1000 * med:+.0f} ms/task beyond bare git",
                alternative=f"bare git ({pairs} interleaved pairs)",
                ratio=statistics.median(ratios),
                target=None,
                seconds=med,
                max_seconds=TARGET_EXTRA,
                note=(
                    f"median of {pairs} pairs {1000 * med:+.0f} ms a task (spread "
                    f"{1000 * min(extra):+.0f} to {1000 * max(extra):+.0f}); wall ratio "
                    f"median {statistics.median(ratios):.2f}; forge's own time from inside a "
                    f"run: {1000 * own['own_per_task_s']:.0f} ms a task (Python "
                    f"{1000 * own['python_cpu_per_task_s']:.0f} ms CPU + git calls the floor "
                    f"does not make {1000 * own['extra_git_per_task_s']:.0f} ms; "
                    f"{own['git_calls_per_task']:.1f} git calls a task)"
                ),
            )
        )
    return figures
