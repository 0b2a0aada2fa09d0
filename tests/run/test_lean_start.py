"""`forge run` loads what its plan uses: a plan of shell commands loads no agent or
reviewer code (each module loaded is paid at every run's start); a plan that
names an agent and a reviewer loads theirs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.gitkit import FAKES, run_forge
from helpers.runkit import statuses, write_plan

PY = sys.executable
AGENT_CODE = {
    "forge.agents.definition",
    "forge.agents.output",
    "forge.agents.spec",
    "forge.run.attempt.review",
}

# The real entry point, and the names of forge's modules loaded when it ends.
_PROBE = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from forge.cli import main
main()
"""


def _loaded(repo: Path, tmp: Path, plan: Path) -> set[str]:
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    out = tmp / "modules.json"
    cp = subprocess.run(
        [PY, "-c", _PROBE, str(out), "run"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return set(json.loads(out.read_text()))


def test_a_plan_of_shell_commands_loads_no_agent_code(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "claude"\n'  # a default no task of this plan uses
        '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n'
        '[[task]]\nid = "b"\nrun = "echo b > b.txt"\nfiles = ["b.txt"]\ndeps = ["a"]\n'
    )
    loaded = _loaded(repo, tmp_path, write_plan(tmp_path, body))
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert loaded & AGENT_CODE == set()


def test_a_plan_with_an_agent_and_a_reviewer_loads_theirs(repo: Path, tmp_path: Path) -> None:
    worker = f"{PY} {FAKES}/agent_edit.py t.txt"
    reviewer = [PY, str(FAKES / "reviewer.py"), "t.txt", "edit by t"]
    body = (
        'agent = "worker"\nreview = "rev"\n'
        f"[agents.worker]\ncommand = {json.dumps(['bash', '-c', worker])}\n"
        f"[agents.rev]\ncommand = {json.dumps(reviewer)}\n"
        '[[task]]\nid = "t"\nprompt = "write t"\nfiles = ["t.txt"]\n'
    )
    loaded = _loaded(repo, tmp_path, write_plan(tmp_path, body))
    assert statuses(repo) == {"t": "MERGED"}
    assert loaded >= AGENT_CODE
