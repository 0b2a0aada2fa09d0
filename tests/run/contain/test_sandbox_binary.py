"""An agent CLI the host has but the sandbox does not show (installed under the
/tmp the sandbox replaces) is a missing binary, an infrastructure failure that
pauses the run (exit 8), not the task's failure."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES
from helpers.runkit import plan_and_run, statuses, write_plan

from forge.base import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)


def test_a_binary_the_sandbox_hides_is_binary_missing(repo: Path, tmp_path: Path) -> None:
    cli = tmp_path / "bin" / "agent"
    cli.parent.mkdir()
    cli.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKES}/agent_edit.py a.txt\n")
    cli.chmod(0o755)
    body = (
        f'sandbox = true\nagent = "tmpcli"\n[agents.tmpcli]\ncommand = {json.dumps([str(cli)])}\n'
        '[[task]]\nid = "a"\nprompt = "do it"\nfiles = ["a.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 8, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "INFRA"}, cp.stdout
    assert "binary-missing" in cp.stdout and f"execvp {cli}" in cp.stdout, cp.stdout
