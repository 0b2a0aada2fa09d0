"""hooks: the fast paths. `pre-push` answered from the verdict cache on a tree
already verified (the installed hook script, fed what git gives it on stdin), and
`forge status` on a 50-task plan that has run. Each is timed (median of several
runs) against `git status` in the same repository; `python -c pass` (the
interpreter's own start) is printed alongside. The issue's target is < 0.3 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import repogen
from kit import Context, Figure, forge, forge_argv, git, median_of, ms, settle
from overhead import paths_for

from plans import BenchPlan, edit_tasks

MAX_SECONDS = 0.3
ZERO = "0" * 40


def quiet(argv: list[str], cwd: Path, *, input: str | None = None) -> None:
    cp = subprocess.run(argv, cwd=cwd, input=input, capture_output=True, text=True)
    if cp.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {cp.returncode}: {cp.stdout}{cp.stderr}")


def baselines(repo: Path, runs: int) -> tuple[float, float]:
    gs = median_of(lambda: quiet(["git", "status", "--porcelain"], repo), runs=runs)
    py = median_of(lambda: quiet([sys.executable, "-c", "pass"], repo), runs=runs)
    return gs, py


def status_figure(ctx: Context, repo: Path, runs: int, gs: float, py: float) -> Figure:
    n = 50
    files = int(git(repo, "ls-files", "-z").count("\0"))
    plan = BenchPlan(
        name="status50",
        tasks=edit_tasks(n, paths_for(n, files, offset=11)),
        max_parallel=2,
    )
    forge(repo, "plan", str(plan.write(ctx.tmp("plan-status"))))
    forge(repo, "run", "status50")
    settle()
    took = median_of(lambda: quiet(forge_argv("status", "status50"), repo), runs=runs)
    as_json = median_of(lambda: quiet(forge_argv("status", "status50", "--json"), repo), runs=runs)
    ctx.log(
        f"  forge status: {ms(took)} (--json {ms(as_json)}); git status {ms(gs)}, "
        f"python -c pass {ms(py)}"
    )
    return Figure(
        bench="hooks",
        config=f"forge status, {n}-task plan run, {files // 1000}k files",
        forge=ms(took),
        alternative=f"{ms(gs)} (git status)",
        ratio=took / gs,
        target=None,
        note=f"--json {ms(as_json)}; python -c pass {ms(py)}",
        seconds=took,
        max_seconds=MAX_SECONDS,
    )


def hook_path(repo: Path, name: str) -> Path:
    hooks = git(repo, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    return Path(hooks) / name


def prepush_figure(ctx: Context, repo: Path, runs: int, gs: float, py: float) -> Figure:
    (repo / "forge.toml").write_text('[verify]\ncommand = "test -f README.md"\n')
    forge(repo, "verify")  # remembers the verdict of HEAD's tree
    forge(repo, "hooks", "install")
    head = git(repo, "rev-parse", "HEAD")
    stdin = f"refs/heads/main {head} refs/heads/main {ZERO}\n"
    hook = hook_path(repo, "pre-push")
    if not os.access(hook, os.X_OK):
        raise RuntimeError(f"forge hooks install left no executable {hook}")
    logs = repo / ".git" / "forge" / "verify" / "logs"
    before = len(list(logs.iterdir())) if logs.is_dir() else 0
    settle()
    took = median_of(lambda: quiet([str(hook), "origin", "/nowhere"], repo, input=stdin), runs=runs)
    after = len(list(logs.iterdir())) if logs.is_dir() else 0
    if after != before:  # the point is the remembered verdict: no verification may run
        raise RuntimeError(f"pre-push ran {after - before} verification(s) on a verified tree")
    ctx.log(f"  pre-push (remembered verdict): {ms(took)}; git status {ms(gs)}")
    return Figure(
        bench="hooks",
        config="pre-push on a verified tree (remembered verdict)",
        forge=ms(took),
        alternative=f"{ms(gs)} (git status)",
        ratio=took / gs,
        target=None,
        note=f"python -c pass {ms(py)}",
        seconds=took,
        max_seconds=MAX_SECONDS,
    )


def run(ctx: Context) -> list[Figure]:
    files = 1000 if ctx.quick else 10_000
    runs = 3 if ctx.quick else 7
    repo = repogen.repo(ctx, files)
    settle()
    gs, py = baselines(repo, runs)
    figures = [status_figure(ctx, repo, runs, gs, py)]
    try:
        figures.append(prepush_figure(ctx, repo, runs, gs, py))
    finally:
        # Later benchmarks share the repository: no hooks, no config left behind.
        forge(repo, "hooks", "uninstall", ok=(0, 2))
        (repo / "forge.toml").unlink(missing_ok=True)
    return figures
