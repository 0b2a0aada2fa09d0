"""forge's benchmark suite: `python bench/bench.py [--quick] [--write-results] [NAME ...]`.

Runs every benchmark (or the ones named) in a fresh temp dir, with no network and
no user git config, and prints each figure with its ratio against what it is
measured against in the same run. See bench/README.md.

Figures come in two kinds, printed apart: comparisons against an alternative (bare
git, a hand-written script, another tool's way: cold and warm, ABBA pairs) and
regression checks (forge against itself, a setting of its own, or a fixed bound).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import best_of
import cluster
import fastpath
import flaky
import flaky_seeds
import gate
import hermetic
import live
import makespan
import merge
import naive
import objects
import overhead
import routing
import scale
import stop
import window
from kit import ALTERNATIVE, REGRESSION, Context, Figure, hermetic_env

BENCHES: dict[str, Callable[[Context], list[Figure]]] = {
    "overhead": overhead.run,
    "makespan": makespan.run,
    "merge": merge.run,
    "naive": naive.run,
    "stop": stop.run,
    "hooks": fastpath.run,
    "live": live.run,
    "scale": scale.run,
    "gate": gate.run,
    "gate-parallel": gate.speculation,
    "gate-window": window.run,
    "flaky": flaky.run,
    "flaky-seeds": flaky_seeds.run,
    "cluster": cluster.run,
    "routing": routing.run,
    "hermetic": hermetic.run,
    "best-of": best_of.run,
    "objects": objects.run,
}
# Rows of other benchmarks that compare forge with another way of doing the same
# work (matched by their alternative's text); every other row is a regression check.
ALTERNATIVE_ROWS = {
    "merge": "git merge --no-ff",
    "hermetic": "checkout, reset --hard",
    "objects": "hashing every object file",
}
HERE = Path(__file__).resolve().parent


def kind_of(figure: Figure) -> str:
    """ALTERNATIVE or REGRESSION: the figure's own word, else its bench's."""
    if figure.kind:
        return figure.kind
    mark = ALTERNATIVE_ROWS.get(figure.bench)
    return ALTERNATIVE if mark is not None and mark in figure.alternative else REGRESSION


QUICK_NOTE = (
    "--quick: sizes below those the targets are set for (and fixed costs weigh more "
    "on few tasks), so these verdicts are indicative only."
)


def machine() -> dict[str, str]:
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    fs = subprocess.run(
        ["df", "--output=fstype", tempfile.gettempdir()], capture_output=True, text=True
    ).stdout.split()
    git_v = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "cpus (nproc)": str(os.cpu_count()),
        "memory": mem,
        "temp filesystem": fs[-1] if fs else "?",
        "git": git_v.removeprefix("git version "),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
    }


def table(figures: list[Figure], *, against: str = "alternative") -> str:
    rows = [("bench", "configuration", "forge", against, "ratio", "target", "")]
    for f in figures:
        rows.append(
            (
                f.bench,
                f.config,
                f.forge,
                f.alternative,
                f"{f.ratio:.2f}",
                f.target_text(),
                f.verdict(),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def sections(figures: list[Figure]) -> list[str]:
    """The figures as two tables: against alternatives, then regression checks."""
    out: list[str] = []
    against = [f for f in figures if kind_of(f) == ALTERNATIVE]
    checks = [f for f in figures if kind_of(f) == REGRESSION]
    if against:
        out += [
            "## Comparisons against an alternative",
            "",
            "forge against another way of doing the same work, measured at the same warmth "
            "on both sides and reported both ways, pairs in ABBA order (the alternative "
            "first, then forge first, and so on): cold, a fresh copy of the repository for "
            "each side of each pair (no idle slot for forge to take over, no worktree for "
            "the alternative); warm, both sides reuse (forge takes over its earlier plan's "
            "slots, the alternative keeps its worktrees between pairs) after a round that "
            "is not measured. The medians come with their spread (min to max over the "
            "pairs) in the details below. `merge`, `hermetic` and `objects` time one "
            "operation repeated in one process on one repository, both sides warm (no "
            "slot or worktree is made inside the clock).",
            "",
            table(against),
            "",
        ]
    if checks:
        out += [
            "## Regression checks",
            "",
            "forge against itself, a setting of its own, or a fixed bound: they say whether "
            "forge got slower, not how it compares with anything else.",
            "",
            table(checks, against="compared with"),
            "",
        ]
    return out


def loadavg() -> str:
    """The 1, 5 and 15-minute load averages, as /proc/loadavg gives them."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def load_note(before: str, after: str) -> str:
    """What RESULTS.md says of the load the figures were taken under."""
    cpus = os.cpu_count() or 1
    try:
        # Before the suite is what others put on the machine; after it, the load is
        # the suite's own last benchmark too (`flaky` runs two plans at once).
        worst = float(before.split()[0])
    except (ValueError, IndexError):
        return f"Load average (1, 5, 15 min): {before} before, {after} after."
    said = f"Load average (1, 5, 15 min): {before} before the suite, {after} after."
    if worst > cpus:
        said += (
            f" The machine is shared and was loaded (above its {cpus} cores): the figures "
            "were taken under load, so wall times are longer and noisier than on an idle "
            "machine; ratios of two sides measured in the same pairs suffer least."
        )
    return said


def write_results(
    figures: list[Figure],
    *,
    quick: bool,
    names: list[str],
    wall: float,
    load: tuple[str, str],
    pending: list[str] | None = None,
    failed: list[str] | None = None,
) -> Path:
    """Write bench/RESULTS.md; `pending`: the benchmarks not run yet (a partial write,
    kept as the suite goes so that a run stopped half way leaves what it measured)."""
    info = machine()
    cmd = "python bench/bench.py" + (" --quick" if quick else "") + " --write-results"
    if names != list(BENCHES):
        cmd += " " + " ".join(names)
    out = [
        "# Benchmark results",
        "",
        f"Written by `{cmd}` on {time.strftime('%Y-%m-%d %H:%M %Z')} "
        f"(the suite took {wall:.0f} s).",
        "",
        *(
            [f"PARTIAL: the suite had not run {', '.join(pending)} yet when this was written.", ""]
            if pending
            else []
        ),
        *([f"FAILED so far (no figures): {', '.join(failed)}.", ""] if failed else []),
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()) + ".",
        "",
        load_note(*load),
        "",
    ]
    out += sections(figures)
    out.append("")
    notes = [f for f in figures if f.note]
    if notes:
        out += ["Details:", ""]
        out += [f"- {f.bench} ({f.config}): {f.note}" for f in notes]
        out.append("")
    missed = [f for f in figures if f.met is False]
    met = [f for f in figures if f.met]
    out.append(
        f"Targets met: {len(met)} of {len(met) + len(missed)}."
        + (
            ""
            if not missed
            else " Missed: " + "; ".join(f"{f.bench} ({f.config})" for f in missed) + "."
        )
    )
    if quick:
        out += ["", QUICK_NOTE]
    diagnosis = HERE / "DIAGNOSIS.md"
    if diagnosis.exists():
        out += ["", diagnosis.read_text().rstrip()]
    path = HERE / "RESULTS.md"
    path.write_text("\n".join(out) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="forge's benchmark suite")
    ap.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benchmarks to run (default: all): {', '.join(BENCHES)}",
    )
    ap.add_argument("--quick", action="store_true", help="small sizes (about a minute in all)")
    ap.add_argument("--write-results", action="store_true", help="write bench/RESULTS.md")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (repos, logs)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark {', '.join(unknown)} (known: {', '.join(BENCHES)})")
    names = args.names or list(BENCHES)
    root = Path(tempfile.mkdtemp(prefix="forge-bench-"))
    hermetic_env(root)
    ctx = Context(root=root, quick=args.quick)
    figures: list[Figure] = []
    failed: list[str] = []
    started = time.perf_counter()
    load_before = loadavg()
    try:
        for name in names:
            ctx.log(f"== {name}")
            t0 = time.perf_counter()
            try:
                got = BENCHES[name](ctx)
            except Exception as exc:  # noqa: BLE001 one broken benchmark must not hide the others
                failed.append(name)
                ctx.log("  ERROR: " + "\n  ".join(str(exc).strip().splitlines()[-12:]))
                continue
            for f in got:
                ctx.log(
                    f"  {f.config}: forge {f.forge}, alternative {f.alternative}, "
                    f"RATIO {f.ratio:.2f} ({f.verdict()})"
                )
            ctx.log(f"  ({time.perf_counter() - t0:.1f} s)")
            figures += got
            if args.write_results:
                left = names[names.index(name) + 1 :]
                if left:
                    write_results(
                        figures,
                        quick=args.quick,
                        names=names,
                        wall=time.perf_counter() - started,
                        load=(load_before, loadavg()),
                        pending=left,
                        failed=failed,
                    )
    finally:
        wall = time.perf_counter() - started
        if args.keep:
            print(f"kept: {root}")
        else:
            # Worktrees of large repositories are slow to delete (ext4): say so.
            t0 = time.perf_counter()
            subprocess.run(["rm", "-rf", "--", str(root)], check=False)
            print(f"removed the temp dir in {time.perf_counter() - t0:.0f} s")
    print()
    print("\n".join(sections(figures)))
    print(f"\n{len(figures)} figures in {wall:.0f} s; load average {load_before} -> {loadavg()}")
    if args.quick:
        print(QUICK_NOTE)
    if failed:
        print(f"FAILED: {', '.join(failed)} (see the errors above); RESULTS.md not written")
        return 1
    if args.write_results:
        load = (load_before, loadavg())
        path = write_results(figures, quick=args.quick, names=names, wall=wall, load=load)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
