"""The real `gh` (where installed) reads the pull request forge opened on the
scripted GitHub: forge's hand-off is one the ecosystem's own client understands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.github import NAME, OWNER, TOKEN, GitHubServer
from helpers.gitkit import run_forge
from helpers.plans import plan, shell
from helpers.runkit import plan_and_run, write_plan

GH = shutil.which("gh")


@pytest.mark.skipif(GH is None, reason="gh is not installed (apt-get install gh)")
def test_gh_reads_what_forge_opened(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    assert plan_and_run(repo, write_plan(tmp_path, plan(shell("a"), verify="true"))).returncode == 0
    assert run_forge(repo, "pr", "--draft").returncode == 0
    home = tmp_path / "gh-home"
    (home / "tmp").mkdir(parents=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "GH_CONFIG_DIR": str(home / "config"),
        "TMPDIR": str(home / "tmp"),
        "GH_ENTERPRISE_TOKEN": TOKEN,
        "GH_PROMPT_DISABLED": "1",
        "GH_NO_UPDATE_NOTIFIER": "1",
        "GH_PAGER": "cat",
    }
    env["GH_HOST"] = f"localhost:{hub.port}"  # gh refuses an IP address as a host
    cp = subprocess.run(
        [str(GH), "api", f"repos/{OWNER}/{NAME}/pulls/1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert cp.returncode == 0, cp.stderr
    pull = json.loads(cp.stdout)
    assert pull["head"]["ref"] == "forge/p" and pull["base"]["ref"] == "main"
    assert pull["draft"] is True and pull["title"].startswith("forge: plan p")
    assert "| `a` | MERGED |" in pull["body"]
