"""`forge status --json` and `forge status TASK --json` keep their shape: the keys
and the types of every value, compared with a shape recorded by an earlier forge
(tests/fixtures/status-shape.json) for the same run: one task landed by the gate,
one failed, one blocked behind it. WRITE_STATUS_SHAPE=1 records the shape again."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from helpers.gitkit import commit_all, run_forge
from helpers.runkit import plan_and_run, write_plan

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "status-shape.json"

PLAN = """
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "b"
run = "echo b > b.txt; exit 1"
files = ["b.txt"]

[[task]]
id = "c"
run = "echo c > c.txt"
files = ["c.txt"]
deps = ["b"]
"""


def shape(value: Any) -> Any:
    """The keys and the types of `value`, not its values (a list: its first item's)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def _json(repo: Path, *args: str) -> Any:
    cp = run_forge(repo, "status", *args, "--json")
    assert cp.returncode in (0, 1), cp.stderr
    return json.loads(cp.stdout)


def test_status_json_keeps_its_shape(repo: Path, tmp_path: Path) -> None:
    (repo / "forge.toml").write_text('[verify]\ncommand = "true"\n')
    commit_all(repo, "verify")
    cp = plan_and_run(repo, write_plan(tmp_path, PLAN))
    assert cp.returncode != 0, cp.stdout  # b failed, c is blocked
    shapes = {
        "status": shape(_json(repo)),
        **{f"status {tid}": shape(_json(repo, tid)) for tid in ("a", "b", "c")},
    }
    if os.environ.get("WRITE_STATUS_SHAPE"):
        GOLDEN.write_text(json.dumps(shapes, indent=1, sort_keys=True) + "\n")
    assert shapes == json.loads(GOLDEN.read_text())
