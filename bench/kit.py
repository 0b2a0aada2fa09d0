"""Shared tools of the benchmark suite: a hermetic environment, timing, git and
forge subprocesses, and the figures each benchmark reports.

Every benchmark compares forge with something measured in the same run, so a
figure is a ratio. A figure is either a comparison against an alternative (bare
git, a hand-written script: measured at the same warmth on both sides, cold and
warm, in ABBA pairs) or a regression check (forge against itself or a fixed bound).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")

FIXED_DATE = "2026-01-01T00:00:00+00:00"
ALTERNATIVE = "alternative"  # a Figure's kind: forge against another way of doing it
REGRESSION = "regression check"  # forge against itself or a fixed bound


@dataclass(frozen=True)
class Figure:
    """One measured line: forge's figure, the alternative's, and their ratio."""

    bench: str
    config: str
    forge: str  # what forge took, human readable
    alternative: str  # what the alternative took
    ratio: float
    target: float | None  # the ratio must be <= target; None: informational
    note: str = ""
    # Where the issue sets a target in seconds (the fast paths), it is checked too.
    seconds: float | None = None
    max_seconds: float | None = None
    kind: str = ""  # ALTERNATIVE or REGRESSION ("": bench.py decides from the bench)

    @property
    def met(self) -> bool | None:
        checks = []
        if self.target is not None:
            checks.append(self.ratio <= self.target)
        if self.max_seconds is not None and self.seconds is not None:
            checks.append(self.seconds < self.max_seconds)
        return None if not checks else all(checks)

    def target_text(self) -> str:
        parts = []
        if self.target is not None:
            parts.append(f"ratio <= {self.target:g}")
        if self.max_seconds is not None:
            parts.append(f"< {self.max_seconds:g} s")
        return ", ".join(parts) or "-"

    def verdict(self) -> str:
        met = self.met
        return "-" if met is None else ("met" if met else "MISSED")


@dataclass
class Context:
    """What every benchmark gets: where to work, how big to go, the repos built so far."""

    root: Path  # the session's temp dir
    quick: bool
    repos: dict[int, Path] = field(default_factory=dict)
    log: Callable[[str], None] = lambda line: print(line, flush=True)

    def tmp(self, name: str) -> Path:
        path = self.root / name
        n = 1
        while path.exists():
            n += 1
            path = self.root / f"{name}-{n}"
        path.mkdir(parents=True)
        return path


def hermetic_env(root: Path) -> None:
    """No user or system git config, a fixed identity, worktrees under `root`."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    for var in list(os.environ):
        if var.startswith(("GIT_", "FORGE_")):
            del os.environ[var]
    os.environ.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Bench Author",
            "GIT_AUTHOR_EMAIL": "author@example.com",
            "GIT_COMMITTER_NAME": "Bench Committer",
            "GIT_COMMITTER_EMAIL": "committer@example.com",
            "GIT_AUTHOR_DATE": FIXED_DATE,
            "GIT_COMMITTER_DATE": FIXED_DATE,
            "GIT_EDITOR": "false",
            "GIT_TERMINAL_PROMPT": "0",
            "FORGE_WORKTREES": str(root / "worktrees"),
            # The benchmarks' suites keep their counters outside the checkout (where a
            # sandboxed lane cannot write), and their figures compare with the runs of
            # earlier rounds, made without it: the sandbox is off unless asked for.
            "FORGE_SANDBOX": os.environ.get("FORGE_SANDBOX", "off"),
            "NO_COLOR": "1",
            "COLUMNS": "200",
        }
    )
    # forge as installed: pip compiles its bytecode at install time, so a run does not
    # compile its modules (an editable install under PYTHONDONTWRITEBYTECODE would,
    # at every start: about 0.1 s of `forge plan` and of `forge run` each).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    import forge

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(forge.__file__).parent)],
        check=False,
        capture_output=True,
    )


def git(
    cwd: Path, *args: str, input: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    cp = subprocess.run(
        ["git", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if cp.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {cwd} exited {cp.returncode}: {cp.stderr}")
    return cp.stdout.strip()


def forge_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "forge", *args]


def forge(
    cwd: Path, *args: str, ok: Sequence[int] = (0,), timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run the installed forge as a user does; a surprising exit code stops the bench."""
    cp = subprocess.run(
        forge_argv(*args),
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )
    if cp.returncode not in ok:
        raise RuntimeError(
            f"forge {' '.join(args)} exited {cp.returncode}:\n{cp.stdout[-2000:]}\n{cp.stderr[-2000:]}"
        )
    return cp


def fresh_copy(ctx: Context, source: Path, tag: str) -> Path:
    """A fresh copy of the repository at `source`: its commits (objects linked, read
    only), `main` checked out, and nothing else: no forge state, no worktree, no idle
    slot of an earlier plan to take over, no remote. One for each side of a cold pair."""
    dest = ctx.tmp(f"copy-{tag}")
    git(ctx.root, "clone", "-q", "--no-tags", "--branch", "main", str(source), str(dest))
    git(dest, "remote", "remove", "origin")
    return dest


def _worktrees_of(repo: Path) -> Path:
    """The repository's folder under FORGE_WORKTREES as forge finds it (another
    repository of the same name may hold `<root>/<name>`)."""
    from forge.errors import ForgeError
    from forge.git.repo import discover

    try:
        return discover(repo).worktrees_root()
    except ForgeError:
        return Path(os.environ["FORGE_WORKTREES"]) / repo.name


def discard(repo: Path) -> None:
    """Remove a copy and the worktrees forge made for it (not timed)."""
    where = [repo]
    if os.environ.get("FORGE_WORKTREES"):
        where.append(_worktrees_of(repo))
    subprocess.run(["rm", "-rf", "--", *map(str, where)], check=False)


def abba(pairs: int) -> list[tuple[str, str]]:
    """The order of each pair's two sides, ABBA: ("A", "B"), ("B", "A"), ... so that
    neither side always runs first (and warms the page cache for the other)."""
    return [("A", "B") if i % 2 == 0 else ("B", "A") for i in range(pairs)]


@dataclass(frozen=True)
class Round:
    """One round of a comparison: the order its two sides run in (ABBA), the
    repository of each side (A: the alternative, B: forge) and, when warm, the folder
    where the alternative keeps its worktrees between rounds (as forge keeps its slots)."""

    index: int  # 0, 1, ... for the measured pairs; -1 for the warm-up round
    sides: tuple[str, str]
    repos: tuple[Path, Path]
    kept: Path | None  # warm: the alternative's worktrees; cold: None (fresh ones)

    @property
    def measured(self) -> bool:
        return self.index >= 0

    @property
    def order(self) -> str:
        return "".join(self.sides)

    def run(self, alternative: Callable[[], A], by_forge: Callable[[], B]) -> tuple[A, B]:
        """Both sides in this round's order: (the alternative's result, forge's)."""
        if self.sides[0] == "A":
            a = alternative()
            b = by_forge()
        else:
            b = by_forge()
            a = alternative()
        return a, b


def rounds(ctx: Context, source: Path, tag: str, pairs: int, *, cold: bool) -> Iterator[Round]:
    """The rounds of a comparison at one warmth, in ABBA order.

    cold: a fresh copy of the repository for each side of each pair (forge finds no
    idle slot to take over, the alternative makes its worktrees), discarded after it.
    warm: one copy for each side kept through every round, forge keeping its slots
    and the alternative its worktrees (in `Round.kept`), after a first round that
    warms both and is not measured (`Round.measured` is False)."""
    if cold:
        for i, sides in enumerate(abba(pairs)):
            repos = (
                fresh_copy(ctx, source, f"{tag}-cold-{i}-alt"),
                fresh_copy(ctx, source, f"{tag}-cold-{i}-forge"),
            )
            try:
                yield Round(i, sides, repos, None)
            finally:
                discard(repos[0])
                discard(repos[1])
        return
    repos = (
        fresh_copy(ctx, source, f"{tag}-warm-alt"),
        fresh_copy(ctx, source, f"{tag}-warm-forge"),
    )
    kept = ctx.tmp(f"{tag}-warm-worktrees")
    try:
        for i, sides in [(-1, ("A", "B")), *enumerate(abba(pairs))]:
            yield Round(i, sides, repos, kept)
    finally:
        discard(repos[0])
        discard(repos[1])
        subprocess.run(["rm", "-rf", "--", str(kept)], check=False)


def spread(values: Sequence[float], scale: float = 1.0, fmt: str = "{:+.0f}") -> str:
    """`median (min to max)` of the values times `scale`."""
    med = statistics.median(values) * scale
    lo, hi = min(values) * scale, max(values) * scale
    return f"{fmt.format(med)} ({fmt.format(lo)} to {fmt.format(hi)})"


def settle() -> None:
    """Flush dirty pages before a timed section, so the writeback of files an
    earlier step wrote (repositories, worktrees) does not land inside it."""
    os.sync()


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished subprocesses so far:
    each one's own and that of the descendants it waited for (RUSAGE_CHILDREN)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """`with stopwatch() as t: ...` then t[0] holds the seconds spent and t[1] the CPU
    seconds of the subprocesses waited for inside (children_cpu): what a side did
    itself, apart from the time it waited for the disk or a core."""
    out: list[float] = []
    start = time.perf_counter()
    cpu = children_cpu()
    try:
        yield out
    finally:
        out.append(time.perf_counter() - start)
        out.append(children_cpu() - cpu)


def timed(fn: Callable[[], object]) -> float:
    with stopwatch() as t:
        fn()
    return t[0]


def median_of(fn: Callable[[], object], *, runs: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    return statistics.median(timed(fn) for _ in range(runs))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def secs(seconds: float) -> str:
    return f"{seconds:.2f} s"
