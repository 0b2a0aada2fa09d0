"""The built-in presets as planners of `forge draft`: each one's command line, in its
read-only mode, against a fake binary of the same name that answers in its CLI's
output format (tests/fakes/planner_cli.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, run_forge

PLAN = """[[task]]
id = "one"
prompt = "Change src/app.py"
files = ["src/app.py"]
"""

# Per preset: what its read-only mode puts on the command line, what it drops, and
# the cost (or the tokens) its output reports.
CASES = {
    "claude": (["--permission-mode", "plan", "-p"], "bypassPermissions", "cost $0.02"),
    "codex": (["--sandbox", "read-only", "--json"], "workspace-write", "cost $0.0065"),
    "gemini": (
        ["--approval-mode=default", "-o", "json"],
        "--approval-mode=yolo",
        "cost $0.00098",  # priced as the model it reports (gemini-2.5-flash), as stats says it
    ),
    "aider": (["--chat-mode", "ask", "--no-auto-commits"], None, "cost $0.0042"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_preset_drafts_read_only_against_its_cli(
    name: str, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, record, plan = tmp_path / "bin", tmp_path / "argv.json", tmp_path / "plan.toml"
    bin_dir.mkdir()
    plan.write_text(PLAN)
    fake = bin_dir / name
    fake.write_text(
        f'#!/bin/sh\nexec {sys.executable} {FAKES / "planner_cli.py"} {name} {record} {plan} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cp = run_forge(repo, "draft", "Change the app", "--agent", name, "-o", "p.toml")
    assert cp.returncode == 0, cp.stderr
    assert (repo / "p.toml").read_text() == PLAN
    seen = json.loads(record.read_text())
    added, dropped, cost = CASES[name]
    for arg in added:
        assert arg in seen["argv"], seen["argv"]
    assert dropped is None or dropped not in seen["argv"]
    assert "Change the app" in seen["prompt"] and "You run read-only" in seen["prompt"]
    assert cost in cp.stdout, cp.stdout
    rows = json.loads(run_forge(repo, "stats", "--json").stdout)["rows"]
    (row,) = rows
    assert row["agent"].startswith(f"{name}:") and row["agent"].endswith("(draft)")
    assert row["input_tokens"] > 0 and row["output_tokens"] > 0
