"""naive: the same 20-task plan through forge and through the script a user would
write by hand: a worktree per task (`git worktree add -b`), the tasks in parallel
with `xargs -P`, each committing its work, then `git merge --no-ff` of every branch
in a checkout, then the test command. Same parallelism, same test command.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import repogen
from kit import Context, Figure, forge, git, secs, settle, stopwatch
from overhead import paths_for

from plans import BenchPlan, edit_tasks

PARALLEL = 4
TARGET = 0.5
TEST = "test -f README.md && git diff --quiet HEAD"

SCRIPT = r"""
set -euo pipefail
base=$(git rev-parse HEAD)
export base WTROOT PREFIX
# 1. a worktree per task, the task, a commit: in parallel
xargs -P "$PARALLEL" -L 1 bash -euo pipefail -c '
  id=$0; path=$1
  git worktree add -q -b "$PREFIX/$id" "$WTROOT/$id" "$base"
  cd "$WTROOT/$id"
  echo change >> "$path"
  git add -A
  git commit -q --no-verify -m "$id"
' < "$TASKS"
# 2. merge every branch in a checkout
git checkout -q -b "$PREFIX-integration" "$base"
while read -r id path; do
  git merge -q --no-ff --no-edit --no-verify "$PREFIX/$id"
done < "$TASKS"
# 3. the test command
bash -c "$TEST"
"""


def by_script(ctx: Context, repo: Path, paths: list[str], tag: str) -> float:
    work = ctx.tmp(f"{tag}-script")
    tasks = work / "tasks.txt"
    tasks.write_text("".join(f"t{i:03d} {p}\n" for i, p in enumerate(paths)))
    env = {
        **os.environ,
        "WTROOT": str(work / "wt"),
        "TASKS": str(tasks),
        "PARALLEL": str(PARALLEL),
        "TEST": TEST,
        "PREFIX": tag,
    }
    settle()
    with stopwatch() as t:
        cp = subprocess.run(
            ["bash", "-c", SCRIPT],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
    if cp.returncode != 0:
        raise RuntimeError(f"the naive script exited {cp.returncode}: {cp.stderr[-2000:]}")
    merges = git(repo, "rev-list", "--count", "--merges", f"main..{tag}-integration")
    git(repo, "checkout", "-q", "main")  # give the checkout back (not timed)
    if int(merges) != len(paths):
        raise RuntimeError(f"the naive script merged {merges} of {len(paths)} branches")
    return t[0]


def by_forge(ctx: Context, repo: Path, paths: list[str], tag: str) -> tuple[float, str]:
    plan = BenchPlan(
        name=tag, tasks=edit_tasks(len(paths), paths), max_parallel=PARALLEL, verify=TEST
    )
    path = plan.write(ctx.tmp(f"plan-{tag}"))
    settle()
    with stopwatch() as t:
        forge(repo, "plan", str(path))
        forge(repo, "run", tag)
    state = json.loads((repo / ".git" / "forge" / "plans" / tag / "state.json").read_text())
    if {x["status"] for x in state["tasks"].values()} != {"MERGED"}:
        raise RuntimeError("forge did not merge every naive task")
    verdict = str((state.get("verification") or {}).get("verdict"))
    return t[0], verdict


def run(ctx: Context) -> list[Figure]:
    files, n = (1000, 8) if ctx.quick else (10_000, 20)
    repo = repogen.repo(ctx, files)
    # The script's 20 `worktree add`s swing with the disk's state: in the full run
    # both sides go twice, alternating, and the best run of each counts.
    reps = 1 if ctx.quick else 2
    scripts, forges = [], []
    for rep in range(reps):
        tag = f"naive{rep}"
        scripts.append(by_script(ctx, repo, paths_for(n, files, offset=5 + 2 * rep), tag))
        forges.append(by_forge(ctx, repo, paths_for(n, files, offset=6 + 2 * rep), tag))
        ctx.log(
            f"  forge {secs(forges[-1][0])} (verdict {forges[-1][1]}); "
            f"hand-written script {secs(scripts[-1])}"
        )
    script_s = min(scripts)
    forge_s, verdict = min(forges)
    runs = (
        f"best of {reps} (forge {', '.join(secs(f) for f, _ in forges)}; "
        f"script {', '.join(secs(x) for x in scripts)}); "
        if reps > 1
        else ""
    )
    return [
        Figure(
            bench="naive",
            config=f"{n} tasks, {files // 1000}k files, {PARALLEL} at once",
            forge=secs(forge_s),
            alternative=f"{secs(script_s)} (worktree per task, xargs -P, merge --no-ff)",
            ratio=forge_s / script_s,
            target=TARGET,
            note=f"{runs}forge's verification verdict: {verdict}",
        )
    ]
