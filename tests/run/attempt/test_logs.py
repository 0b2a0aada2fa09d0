"""Bounded logs: a command's log is capped where it is written, a failure's reason
comes from the log's tail, and forge's memory does not grow with what a task prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.gitkit import forge_cmd, run_forge
from helpers.runkit import state, write_plan

LOUD = """
[[task]]
id = "loud"
run = "yes | head -c 100000000; echo the-last-word; exit 1"
files = ["loud.txt"]
"""


def _measured_run(repo: Path, *args: str) -> tuple[int, float]:
    """`forge run` in a process of its own: exit code and forge's peak RSS in MB (the
    largest of forge and what it ran; `yes` and `head` are tiny)."""
    probe = (
        "import resource, subprocess, sys\n"
        f"cp = subprocess.run({forge_cmd(*args)!r}, capture_output=True)\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(cp.returncode, rss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), float(out[1])


def test_a_task_printing_100_mb_is_capped_and_forge_stays_small(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, LOUD))).returncode == 0
    code, rss_mb = _measured_run(repo, "run")
    assert code == 5
    assert rss_mb < 150, f"forge's peak RSS was {rss_mb:.0f} MB"
    st = state(repo)["tasks"]["loud"]
    log = Path(st["attempts"][0]["log"])
    size = log.stat().st_size
    assert 50 * 2**20 <= size < 50 * 2**20 + 4096  # the default cap and its marker lines
    with log.open("rb") as fh:
        fh.seek(-400, os.SEEK_END)
        end = fh.read().decode()
    assert "log cap of 52428800 bytes reached; the rest of the output is dropped" in end
    assert "bytes of output dropped" in end
    # The reason comes from the tail of what was kept.
    assert st["reason"] == "command exited 1: y"


def test_the_cap_is_set_in_the_plan(repo: Path, tmp_path: Path) -> None:
    body = 'log_cap = "1K"\n' + LOUD.replace("100000000", "5000")
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    assert run_forge(repo, "run").returncode == 5
    log = Path(state(repo)["tasks"]["loud"]["attempts"][0]["log"])
    text = log.read_text()
    assert text.startswith("y\n" * 512)
    assert "log cap of 1024 bytes reached" in text and "the-last-word" not in text
    assert "forge: 3990 bytes of output dropped" in text  # 5000 + "the-last-word\\n" - 1024


def test_a_bad_log_cap_is_a_plan_error(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, 'log_cap = "lots"\n' + LOUD)))
    assert cp.returncode == 2 and "log_cap" in cp.stderr and "lots" in cp.stderr
    assert json.dumps("lots") in cp.stderr or "'lots'" in cp.stderr


def test_one_endless_line_is_said_by_its_end_not_as_no_output(repo: Path, tmp_path: Path) -> None:
    # Past the log cap the kept tail is one line cut at its start, then forge's markers.
    body = """
log_cap = "100K"
[[task]]
id = "line"
run = "head -c 200000 /dev/zero | tr '\\\\0' x; exit 4"
files = ["line.txt"]
"""
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    assert run_forge(repo, "run").returncode == 5
    reason = state(repo)["tasks"]["line"]["reason"]
    assert reason == (
        "command exited 4: …" + "x" * 120 + " (its output ends in one line of over 64 KiB, "
        "cut by the log cap)"
    ), reason
