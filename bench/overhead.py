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
import subprocess
from pathlib import Path

import repogen
from kit import Context, Figure, forge, git, secs, settle, stopwatch

from plans import BenchPlan, edit_tasks

SLOTS = 2
TARGET = 2.0
REPEATS = 2

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


def run(ctx: Context) -> list[Figure]:
    sizes = [(1000, 6)] if ctx.quick else [(1000, 20), (10_000, 20), (50_000, 20)]
    figures = []
    for files, n in sizes:
        repo = repogen.repo(ctx, files)
        # This machine class is noisy (writeback, ext4 inode reuse): on the large
        # repositories each side runs twice, alternating, and the best run counts.
        reps = 1 if ctx.quick or files < 10_000 else REPEATS
        floors, forges = [], []
        for rep in range(reps):
            tag = f"{files}-{rep}"
            # Distinct files for every run, so none finds another's work merged.
            floors.append(floor(ctx, repo, paths_for(n, files, offset=1 + 2 * rep), tag))
            forges.append(through_forge(ctx, repo, paths_for(n, files, offset=2 + 2 * rep), tag))
            plan_s, run_s, inner = forges[-1]
            ctx.log(
                f"  {files} files, {n} tasks: forge plan {secs(plan_s)} + run {secs(run_s)} "
                f"(inside the run: {secs(inner)}); floor {secs(floors[-1])}"
            )
        fl = min(floors)
        plan_s, run_s, inner = min(forges, key=lambda f: f[0] + f[1])
        total = plan_s + run_s
        runs = f"best of {reps}: " if reps > 1 else ""
        figures.append(
            Figure(
                bench="overhead",
                config=f"{files // 1000}k files, {n} tasks, {SLOTS} slots",
                forge=f"{total / n:.3f} s/task",
                alternative=f"{fl / n:.3f} s/task (bare git)",
                ratio=total / fl,
                target=TARGET if files >= 10_000 else None,
                note=(
                    f"{runs}forge plan {secs(plan_s)} + run {secs(run_s)}, floor {secs(fl)}"
                    + (
                        f" (all runs: forge {', '.join(secs(a + b) for a, b, _ in forges)}; "
                        f"floor {', '.join(secs(x) for x in floors)})"
                        if reps > 1
                        else ""
                    )
                ),
            )
        )
    return figures
