"""The agents' per-task homes live under $XDG_STATE_HOME/forge, never in the
repository, and `forge clean` removes them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, write_plan

WRITE = "import os; open('t.txt', 'w').write(os.environ['FORGE_STATE_DIR'])"


def test_agent_state_is_outside_the_repository(repo: Path, tmp_path: Path) -> None:
    argv = json.dumps([sys.executable, "-c", WRITE])
    body = f'agent = "fake"\n[agents.fake]\ncommand = {argv}\n'
    body += '[[task]]\nid = "t"\nprompt = "edit"\nfiles = ["t.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    where = Path(git(repo, "show", "forge/p-integration:t.txt").strip())
    state_home = Path(os.environ["XDG_STATE_HOME"])
    assert where.is_relative_to(state_home / "forge") and where.name == "agent-state"
    assert not where.is_relative_to(repo) and where.is_dir()
    assert where.parent.name == "p"
    cleaned = run_forge(repo, "clean")
    assert cleaned.returncode == 0 and f"removed the agents' state {where}" in cleaned.stdout
    assert not where.exists()
