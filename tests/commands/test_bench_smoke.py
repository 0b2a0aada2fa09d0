"""The benchmark suite's smallest configuration still runs, so the benches don't rot.

Speed is not asserted here (bench/ measures it); only that the suite runs forge end
to end, checks every task merged, and prints a ratio for each figure.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench.py"


@pytest.mark.slow
@pytest.mark.timeout(450)
def test_quick_overhead_bench_runs_and_prints_ratios() -> None:
    cp = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "overhead"],
        capture_output=True,
        text=True,
        timeout=400,  # cold and warm ABBA pairs: a few minutes on a loaded machine
        stdin=subprocess.DEVNULL,
    )
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    ratios = re.findall(r"RATIO (\d+\.\d+)", cp.stdout)
    assert ratios, cp.stdout
    assert all(float(r) > 0 for r in ratios)
    assert "| overhead |" in cp.stdout  # the summary table
    # every comparison against bare git both ways, in wall-clock and in CPU time, apart
    # from the regression checks
    for warmth in ("cold", "warm"):
        assert re.search(rf"2 slots, {warmth} +\| \+?-?\d+ ms/task beyond", cp.stdout)
        assert re.search(rf"2 slots, {warmth}: CPU +\| \+?-?\d+ ms/task of CPU", cp.stdout)
    tables = cp.stdout.split("## Comparisons against an alternative")[-1]
    alternatives, checks = tables.split("## Regression checks")
    assert "own time inside a run" in checks and "own time" not in alternatives


def test_unknown_benchmark_is_refused() -> None:
    cp = subprocess.run(
        [sys.executable, str(BENCH), "nosuch"], capture_output=True, text=True, timeout=30
    )
    assert cp.returncode == 2
    assert "unknown benchmark nosuch" in cp.stderr
