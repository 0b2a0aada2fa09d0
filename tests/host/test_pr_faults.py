"""`forge pr` facing bad input and a faulty host: one line each, the contract's
exit code, and nothing half done (a branch someone else moved stays where it is)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.github import Fault, GitHubServer
from helpers.gitkit import commit_all, git, run_forge
from helpers.plans import plan, shell
from helpers.runkit import plan_and_run, write_plan

ONE = plan(shell("a"), verify="true")


def _run(repo: Path, tmp_path: Path, body: str = ONE) -> str:
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode in (0, 5), cp.stdout + cp.stderr
    return git(repo, "rev-parse", "forge/p-integration")


def _one_line(cp: subprocess.CompletedProcess[str], code: int, *said: str) -> str:
    assert cp.returncode == code, cp.stdout + cp.stderr
    lines = [line for line in cp.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("forge: "), cp.stderr
    assert "Traceback" not in cp.stderr
    for text in said:
        assert text in lines[0], lines[0]
    return lines[0]


def _set_host(repo: Path, *lines: str) -> None:
    """forge.toml's [host] with these lines changed (the file in the checkout)."""
    text = (repo / "forge.toml").read_text()
    for line in lines:
        key = line.split("=")[0].strip()
        kept = [old for old in text.splitlines() if not old.startswith(f"{key} ")]
        text = "\n".join(kept) + f"\n{line}\n"
    (repo / "forge.toml").write_text(text)


def test_no_remote(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    cp = run_forge(repo, "pr", "--remote", "upstream")
    _one_line(cp, 2, "no remote named 'upstream'", "origin")
    assert not hub.script.seen


def test_a_remote_not_on_github(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    git(repo, "remote", "add", "lab", "https://user:secret@gitlab.com/octo/app.git")
    (repo / "forge.toml").write_text("")
    cp = run_forge(repo, "pr", "--remote", "lab")
    line = _one_line(cp, 2, "is not on GitHub", "[host] api")
    assert "secret" not in line
    assert not hub.script.seen


def test_no_token(
    repo: Path, tmp_path: Path, hub: GitHubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(repo, tmp_path)
    monkeypatch.delenv("GH_ENTERPRISE_TOKEN")
    monkeypatch.setenv("GH_CONFIG_DIR", str(tmp_path / "gh"))
    cp = run_forge(repo, "pr")
    _one_line(cp, 2, "no token for 127.0.0.1", "GH_ENTERPRISE_TOKEN")
    assert not hub.script.seen


def test_a_token_without_rights(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    hub.script.can_push = False
    _one_line(run_forge(repo, "pr"), 2, "cannot push to octo/app")
    assert hub.script.head_of("forge/p") is None
    hub.script.can_push = True
    hub.script.faults["POST .*/pulls$"] = Fault(status=403)
    _one_line(run_forge(repo, "pr"), 2, "lacks the rights to open a pull request")
    assert not hub.script.pulls


def test_host_down_or_slow(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    _set_host(repo, 'timeout = "0.5s"')
    hub.script.faults["GET .*/repos/octo/app$"] = Fault(delay=3.0)
    _one_line(run_forge(repo, "pr"), 8, "did not answer within 0.5s")
    hub.close()
    _one_line(run_forge(repo, "pr"), 8, "cannot reach 127.0.0.1")


def test_rate_limit_waited_out_or_refused(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    hub.script.faults["GET .*/repos/octo/app$"] = Fault(reset_in=3600)
    _one_line(run_forge(repo, "pr"), 8, "rate-limited", "[host] wait")
    hub.script.faults["GET .*/repos/octo/app$"] = Fault(reset_in=1)
    cp = run_forge(repo, "pr")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "opened pull request #1" in cp.stdout


def test_a_branch_someone_else_moved_is_not_overwritten(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    _run(repo, tmp_path)
    assert run_forge(repo, "pr").returncode == 0
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(hub.script.bare), str(other))
    git(other, "checkout", "-q", "forge/p")
    (other / "theirs.txt").write_text("theirs\n")
    theirs = commit_all(other, "theirs")
    git(other, "push", "-q", "origin", "forge/p")
    _one_line(run_forge(repo, "pr"), 2, "which forge did not push", "does not overwrite")
    assert hub.script.head_of("forge/p") == theirs


def test_a_pull_request_closed_by_a_person(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    assert run_forge(repo, "pr").returncode == 0
    hub.script.pulls[1].state = "closed"
    _one_line(run_forge(repo, "pr"), 2, "#1 was closed without a merge")


def test_an_unverified_head_is_not_handed_off(
    repo: Path, tmp_path: Path, hub: GitHubServer
) -> None:
    _run(repo, tmp_path, plan(shell("a")))
    _one_line(run_forge(repo, "pr"), 2, "has no verification (UNVERIFIED)")
    assert not hub.script.seen


def test_branch_protection_refusing_the_push(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    hook = hub.script.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'GH006: Protected branch update failed' >&2\nexit 1\n")
    hook.chmod(0o755)
    _one_line(run_forge(repo, "pr"), 2, "refused the push to forge/p", "GH006")
    assert not hub.script.pulls


def test_a_conflict_on_the_base_is_said(repo: Path, tmp_path: Path, hub: GitHubServer) -> None:
    _run(repo, tmp_path)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(hub.script.bare), str(other))
    (other / "a.txt").write_text("not a\n")
    commit_all(other, "a.txt on main")
    git(other, "push", "-q", "origin", "main")
    cp = run_forge(repo, "pr")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "CONFLICTING" in cp.stdout and "conflicts with main" in cp.stdout
