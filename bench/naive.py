"""naive: the same 20-task plan through forge and through the script a user would
write by hand, in two forms. The naive one: a worktree per task (`git worktree add
-b`), the tasks in parallel with `xargs -P`, each committing its work. The careful
one: P worktrees made once (kept between rounds when warm), each running its share
of the tasks one after another (checkout -B, edit, commit). Both then `git merge
--no-ff` every branch in a checkout and run the test command. Same parallelism,
same test command.

Measured in ABBA pairs at the same warmth on both sides: cold (a fresh copy of the
repository for each side of each pair: forge has no idle slot to take over, the
script no worktree) and, for the careful script, warm too (forge takes over the
slots of its plan before, the script keeps its worktrees; one round not measured).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from functools import partial
from pathlib import Path

import repogen
from kit import (
    ALTERNATIVE,
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
  # one add at a time: the worktree registry of git fails adds side by side ("failed
  # to read .git/worktrees/ID/commondir"), so even a quick script takes a lock
  ( flock 8; git worktree add -q -b "$PREFIX/$id" "$WTROOT/$id" "$base" ) 8>"$WTROOT.add.lock"
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


CAREFUL = r"""
set -euo pipefail
base=$(git rev-parse HEAD)
# 1. P worktrees, made once (one after another: git's worktree registry does not
#    take adds side by side), each running its share of the tasks one after another
for w in $(seq 0 $((PARALLEL - 1))); do
  slot="$WTROOT/slot-$w"
  [ -e "$slot/.git" ] || git worktree add -q --detach "$slot" "$base"
done
pids=""
for w in $(seq 0 $((PARALLEL - 1))); do
  (
    cd "$WTROOT/slot-$w"
    awk -v w="$w" -v p="$PARALLEL" '(NR - 1) % p == w' "$TASKS" | while read -r id path; do
      git checkout -q --force -B "$PREFIX/$id" "$base"
      echo change >> "$path"
      git add -A
      git commit -q --no-verify -m "$id"
    done
  ) &
  pids="$pids $!"
done
for pid in $pids; do wait "$pid"; done
# 2. merge every branch in a checkout
git checkout -q -b "$PREFIX-integration" "$base"
while read -r id path; do
  git merge -q --no-ff --no-edit --no-verify "$PREFIX/$id"
done < "$TASKS"
# 3. the test command
bash -c "$TEST"
"""


def by_script(
    ctx: Context,
    repo: Path,
    paths: list[str],
    tag: str,
    *,
    script: str = SCRIPT,
    kept: Path | None = None,
) -> float:
    """Seconds the script takes; `kept`: where its worktrees stay between rounds."""
    work = ctx.tmp(f"{tag}-script")
    tasks = work / "tasks.txt"
    tasks.write_text("".join(f"t{i:03d} {p}\n" for i, p in enumerate(paths)))
    env = {
        **os.environ,
        "WTROOT": str(kept or work / "wt"),
        "TASKS": str(tasks),
        "PARALLEL": str(PARALLEL),
        "TEST": TEST,
        "PREFIX": tag,
    }
    settle()
    with stopwatch() as t:
        cp = subprocess.run(
            ["bash", "-c", script],
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


def _pairs(
    ctx: Context, source: Path, files: int, n: int, pairs: int, *, careful: bool, cold: bool
) -> list[tuple[float, float, str]]:
    """(script seconds, forge seconds, forge's verdict) of each measured pair at one
    warmth (kit.rounds), in ABBA order."""
    form = "careful" if careful else "naive"
    warmth = "cold" if cold else "warm"
    script = CAREFUL if careful else SCRIPT
    out = []
    for rnd in rounds(ctx, source, f"{form}-{files}", pairs, cold=cold):
        tag = f"{form}-{warmth}-{rnd.index + 1}"
        paths = paths_for(n, files, offset=7 + 2 * rnd.index)
        sc, (fo, verdict) = rnd.run(
            partial(by_script, ctx, rnd.repos[0], paths, tag, script=script, kept=rnd.kept),
            partial(by_forge, ctx, rnd.repos[1], paths, tag),
        )
        if not rnd.measured:
            continue
        out.append((sc, fo, verdict))
        ctx.log(
            f"  {form} script, {warmth} pair {rnd.index + 1} ({rnd.order}): forge "
            f"{secs(fo)} (verdict {verdict}); script {secs(sc)}"
        )
    return out


_WHAT = {
    "naive": "worktree per task, xargs -P, merge --no-ff",
    "careful": f"{PARALLEL} worktrees made once, tasks one after another, merge --no-ff",
}


def run(ctx: Context) -> list[Figure]:
    files, n = (1000, 8) if ctx.quick else (10_000, 20)
    pairs = 2 if ctx.quick else 4
    source = repogen.repo(ctx, files)
    figures = []
    for careful, cold in ((False, True), (True, True), (True, False)):
        got = _pairs(ctx, source, files, n, pairs, careful=careful, cold=cold)
        form, warmth = ("careful" if careful else "naive"), ("cold" if cold else "warm")
        ratios = [fo / sc for sc, fo, _ in got]
        figures.append(
            Figure(
                bench="naive",
                config=f"{n} tasks, {files // 1000}k files, {PARALLEL} at once, {form} script, "
                f"{warmth}",
                forge=secs(statistics.median(fo for _, fo, _ in got)),
                alternative=f"{secs(statistics.median(sc for sc, _, _ in got))} "
                f"({_WHAT[form]}; {warmth})",
                ratio=statistics.median(ratios),
                target=TARGET if careful and cold else None,
                kind=ALTERNATIVE,
                note=(
                    f"{warmth}: median of {len(got)} ABBA pairs {spread(ratios, 1, '{:.2f}')}; "
                    f"forge {', '.join(secs(fo) for _, fo, _ in got)}; script "
                    f"{', '.join(secs(sc) for sc, _, _ in got)}; forge's verdicts "
                    f"{sorted({v for _, _, v in got})}"
                ),
            )
        )
    return figures
