"""What one `forge` process costs before and around its work: the CPU (user +
system) of `forge status`, `forge plan` (a one-task plan) and `forge run` (its plan
with nothing left to do), each a real process, against the interpreter's own start
(`python -c pass`). With `--against REV`, the same commands of forge at git
revision REV (a worktree of this repository), in ABBA order with this checkout's.

    python bench/startup.py [--runs 30] [--against 98d844b]

A regression check (forge against itself and the interpreter), not a comparison
with an alternative: every test of the suite and every plan a user runs starts such
processes (two a plan), so their fixed cost is paid again and again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kit import hermetic_env

HERE = Path(__file__).resolve().parents[1]
# Runs `forge` with the arguments after it, prints its own CPU seconds (the
# process's, not its children's: git's work is not startup) when it ends.
_PROBE = """
import atexit, os, sys
atexit.register(lambda: print(sum(os.times()[:2]), file=sys.stderr))
sys.argv = ["forge", *sys.argv[1:]]
from forge.cli import main
main()
"""
_PLAN = '[[task]]\nid = "t1"\nrun = "echo hi > b.txt"\nfiles = ["b.txt"]\n'


def _repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "p.toml").write_text(_PLAN)
    for args in (["init", "-q", "-b", "main"], ["add", "p.toml"], ["commit", "-q", "-m", "a"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def _cpu(repo: Path, source: Path | None, args: list[str]) -> float:
    """CPU seconds of one forge process run from `source` (None: this checkout)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    if args == ["pass"]:
        argv = [sys.executable, "-c", "import os, sys; print(sum(os.times()[:2]), file=sys.stderr)"]
    else:
        argv = [sys.executable, "-c", _PROBE, *args]
    cp = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False)
    return float(cp.stderr.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--against", metavar="REV", help="forge at this revision, ABBA")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="forge-startup-") as tmp:
        root = Path(tmp)
        hermetic_env(root)
        repo = _repo(root)
        other = None
        if opts.against:
            other = root / "other"
            subprocess.run(
                ["git", "worktree", "add", "-q", "--detach", str(other), opts.against],
                cwd=HERE,
                check=True,
            )
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(other / "forge")])
        try:
            _measure(repo, other, opts.runs, opts.against)
        finally:
            if other is not None:
                subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=HERE)
    return 0


def _measure(repo: Path, other: Path | None, runs: int, against: str | None) -> None:
    sides: list[Path | None] = [None] if other is None else [None, other]
    _cpu(repo, None, ["plan", "p.toml"])  # recorded once: `forge run` has a plan
    print(f"CPU of one process (user + system), median of {runs} runs, {sys.version.split()[0]}")
    for args in (["pass"], ["status"], ["plan", "p.toml"], ["run", "p.toml"]):
        taken: dict[Path | None, list[float]] = {side: [] for side in sides}
        for i in range(runs):
            for side in sides if i % 2 == 0 else sides[::-1]:  # ABBA
                taken[side].append(_cpu(repo, side, args))
        name = "python -c pass" if args == ["pass"] else "forge " + " ".join(args)
        line = f"{name:<20} {1000 * statistics.median(taken[None]):6.0f} ms"
        if other is not None:
            line += f"   at {against}: {1000 * statistics.median(taken[other]):6.0f} ms"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
