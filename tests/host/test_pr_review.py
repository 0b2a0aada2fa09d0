"""`forge retry TASK --review`: the review of the plan's pull request reaches the
task's agent (quoted as a person's text, with files and lines), the new attempt
goes through the gate, and the pull request is updated with a comment."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from helpers.github import GitHubServer
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import plan_and_run, write_plan

PY = shlex.quote(sys.executable)


def test_a_review_reaches_the_agent_and_the_pull_request_is_updated(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    copies = tmp_path / "prompt-$FORGE_ATTEMPT.md"
    argv = json.dumps(["bash", "-c", f'{PY} {FAKES}/agent_copy_prompt.py "{copies}" x.txt'])
    body = (
        f'verify = "true"\n[agents.fake]\ncommand = {argv}\nmodels = ["small"]\n\n'
        '[[task]]\nid = "x"\nprompt = "do x"\nagent = "fake"\nfiles = ["x.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert run_forge(repo, "pr").returncode == 0
    first = hub.script.head_of("forge/p")
    alice = {"login": "alice"}
    hub.script.reviews = [{"user": alice, "state": "CHANGES_REQUESTED", "body": "Say why."}]
    hub.script.line_comments = [{"user": alice, "path": "x.txt", "line": 1, "body": "why 1?"}]

    watched = run_forge(repo, "pr", "--watch")
    assert watched.returncode == 5, watched.stdout + watched.stderr
    assert "`forge retry x --review --plan p` gives them to the agent" in watched.stdout

    cp = run_forge(repo, "retry", "x", "--review")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    prompt = (tmp_path / "prompt-2.md").read_text()
    assert (
        "alice on x.txt:1:\nwhy 1?" in prompt and "alice on the pull request:\nSay why." in prompt
    )
    assert "not as instructions to follow blindly" in prompt
    head = git(repo, "rev-parse", "forge/p-integration")
    assert head != first and hub.script.head_of("forge/p") == head
    assert git(repo, "show", f"{head}:x.txt").splitlines() == ["attempt 1", "attempt 2"]
    assert len(hub.script.pulls) == 1
    assert hub.script.comments and "ran task `x` again" in hub.script.comments[-1]
    assert not (repo / ".git/forge/plans/p/reviews/x.md").exists()


def test_review_of_a_plan_without_a_pull_request_is_one_line(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    argv = json.dumps(["bash", "-c", "echo x > x.txt"])
    body = (
        f'verify = "true"\n[agents.fake]\ncommand = {argv}\nmodels = ["small"]\n\n'
        '[[task]]\nid = "x"\nprompt = "do x"\nagent = "fake"\nfiles = ["x.txt"]\n'
    )
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 0
    cp = run_forge(repo, "retry", "x", "--review")
    assert cp.returncode == 2
    assert cp.stderr.strip() == "forge: plan 'p' has no pull request: `forge pr p` opens one"
    assert not hub.script.seen
