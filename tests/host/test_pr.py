"""`forge pr` through the CLI against a scripted GitHub: the verified head is
pushed and one pull request tells the run's story; later calls update it in
place; the host's checks come back as verdicts; auto-merge lands the work on the
base, after which the plan counts as accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.github import TOKEN, GitHubServer
from helpers.gitkit import git, run_forge
from helpers.plans import plan, shell, task
from helpers.runkit import plan_and_run, spawn_forge, wait_for, write_plan

TWO = plan(
    shell("a"),
    shell("b"),
    task("bad", run="echo x > bad.txt; exit 1", files=["bad.txt"]),
    verify="true",
)


def _run(repo: Path, tmp_path: Path, body: str = TWO) -> str:
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode in (0, 5), cp.stdout + cp.stderr
    return git(repo, "rev-parse", "forge/p-integration")


def _record(repo: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((repo / ".git/forge/plans/p/pr.json").read_text())
    return data


def test_pr_opens_one_pull_request_with_the_story_then_updates_it(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    head = _run(repo, tmp_path)
    cp = run_forge(repo, "pr")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "opened pull request #1" in cp.stdout
    script = hub.script
    assert script.head_of("forge/p") == head
    pull = script.pulls[1]
    assert pull.base == "main" and pull.head == "forge/p"
    for said in ("`a`", "`b`", "MERGED", "Not landed:", "`bad` FAILED"):
        assert said in pull.body, pull.body
    assert _record(repo)["pushed"] == head
    # the token reached the host as a header, and nowhere forge writes or says
    assert any(TOKEN in h.get("Authorization", "") for _, _, h in script.seen)
    written = "".join(p.read_text(errors="replace") for p in (repo / ".git/forge").rglob("*.json"))
    assert TOKEN not in cp.stdout + cp.stderr + written

    again = run_forge(repo, "pr", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["number"] == 1
    assert len(script.pulls) == 1


def test_a_failing_check_comes_back_as_a_hosted_verdict(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    head = _run(repo, tmp_path)
    hub.script.checks = {"build": "failure", "lint": "success"}
    cp = run_forge(repo, "pr")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "FAIL hosted: build" in cp.stdout
    verdicts = _record(repo)["verdicts"]
    assert isinstance(verdicts, list) and len(verdicts) == 1
    assert verdicts[0]["lane"] == "hosted: build" and verdicts[0]["commit"] == head
    assert verdicts[0]["base"] == "main" and verdicts[0]["url"] == "https://ci.example/build"
    assert verdicts[0]["base_sha"] == hub.script.head_of("main")
    status = run_forge(repo, "status", "p")
    assert "pull request #1 open; checks: build failed, lint passed" in status.stdout


def test_auto_merge_lands_the_work_on_the_base_and_the_plan_counts_as_accepted(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    _run(repo, tmp_path, plan(shell("a"), verify="true"))
    hub.script.checks = {"build": "success"}
    cp = run_forge(repo, "pr", "--auto-merge", "--merge-method", "squash", "--watch")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "merged into main" in cp.stdout
    script = hub.script
    main = script.head_of("main")
    assert script.git("show", f"{main}:a.txt") == "a"
    status = run_forge(repo, "status", "p")
    assert "pull request #1 merged" in status.stdout
    clean = run_forge(repo, "clean", "p")
    assert "deleted branch forge/p-integration" in clean.stdout, clean.stdout + clean.stderr
    forget = run_forge(repo, "forget", "p")
    assert forget.returncode == 0, forget.stderr


def test_watch_says_when_no_check_is_reported(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    _run(repo, tmp_path, plan(shell("a"), verify="true"))
    cp = run_forge(repo, "pr", "--watch")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "no checks reported after" in cp.stdout
    assert hub.script.pulls[1].state == "open"


def test_watch_tells_notify_of_a_failing_check(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    events = tmp_path / "events.jsonl"
    _run(repo, tmp_path, plan(shell("a"), verify="true", notify=f"cat >> {events}"))
    told = events.read_text()  # the run's own end
    hub.script.checks = {"build": None}
    watcher = spawn_forge(repo, "pr", "--watch")
    wait_for(lambda: bool(hub.script.pulls), what="the pull request")
    wait_for(lambda: len(hub.script.seen) > 12, what="the watch asking again")
    assert events.read_text() == told  # a pending check decides nothing
    hub.script.checks = {"build": "failure"}
    out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 5, out + err
    assert "the host's checks failed: hosted: build" in out
    event = json.loads(events.read_text().splitlines()[-1])
    assert event["event"] == "needs_person" and "hosted: build failed" in event["reason"]


def test_an_actions_token_is_said_to_start_no_workflow(
    repo: Path, tmp_path: Path, hub: GitHubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(repo, tmp_path, plan(shell("a"), verify="true"))
    monkeypatch.setenv("GH_ENTERPRISE_TOKEN", "ghs_actionsinstallationtoken")
    cp = run_forge(repo, "pr")
    assert cp.returncode == 0, cp.stderr
    assert "looks like GitHub Actions' own GITHUB_TOKEN" in cp.stderr
    assert "ghs_actions" not in cp.stderr + cp.stdout
    assert len(hub.script.pulls) == 1
