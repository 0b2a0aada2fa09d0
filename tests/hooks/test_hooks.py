"""The git hooks, driven by real git: install/uninstall, chaining, pre-push, supersede."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import alive as running
from helpers.runkit import wait_for

from forge.base.files import read_json
from forge.git.repo import discover
from forge.verify import background as verify_bg

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def configure(repo: Path, lanes: dict[str, str], *, reruns: int = 0) -> str:
    body = "".join(f"{name} = {json.dumps(cmd)}\n" for name, cmd in lanes.items())
    (repo / "forge.toml").write_text(
        f'[verify]\nreruns = {reruns}\ngrace = "0.5s"\n[verify.lanes]\n{body}'
    )
    return commit_all(repo, "verify config")


@pytest.fixture(autouse=True)
def no_background_left(repo: Path) -> Iterator[None]:
    """Stop (as a newer commit would) whatever background verification a test left."""
    yield
    r = discover(repo)
    current = verify_bg.running(r)
    if current is not None:
        verify_bg.supersede(current, log=lambda *_a: None)


def push(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "origin", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def remote(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    return bare


def remote_head(bare: Path, branch: str = "main") -> str | None:
    cp = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        cwd=bare,
        capture_output=True,
        text=True,
    )
    return cp.stdout.strip() or None


def hooks_of(repo: Path) -> Path:
    return repo / ".git" / "hooks"


def test_install_keeps_legacy_hooks_chains_them_and_uninstall_restores(
    repo: Path, remote: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    legacy_push = f'#!/bin/sh\necho "args: $*" >> {seen}\ncat >> {seen}\nexit 0\n'
    legacy_commit = f"#!/bin/sh\necho post-commit-ran >> {seen}\n"
    hooks = hooks_of(repo)
    (hooks / "pre-push").write_text(legacy_push)
    (hooks / "post-commit").write_text(legacy_commit)
    for name in ("pre-push", "post-commit"):
        (hooks / name).chmod(0o755)

    res = run_forge(repo, "hooks", "install")
    assert res.returncode == 0, res.stderr
    assert "pre-push (your hook kept as pre-push.forge-legacy" in res.stdout
    assert (hooks / "pre-push.forge-legacy").read_text() == legacy_push
    assert "forge.hooks pre-push" in (hooks / "pre-push").read_text()
    assert os.access(hooks / "post-merge", os.X_OK)

    head = configure(repo, {"unit": "true"})
    assert "post-commit-ran" in seen.read_text()
    pushed = push(repo, "main")
    assert pushed.returncode == 0, pushed.stderr
    text = seen.read_text()
    assert f"args: origin {remote}" in text
    assert f"refs/heads/main {head} refs/heads/main" in text  # the legacy hook got stdin
    assert remote_head(remote) == head

    # The legacy hook's failure is the push's failure.
    (hooks / "pre-push.forge-legacy").write_text("#!/bin/sh\necho legacy says no >&2\nexit 3\n")
    (repo / "more.txt").write_text("more\n")
    commit_all(repo, "more")
    blocked = push(repo, "main")
    assert blocked.returncode != 0
    assert "legacy says no" in blocked.stderr
    assert remote_head(remote) == head

    (hooks / "pre-push.forge-legacy").write_text(legacy_push)
    res = run_forge(repo, "hooks", "uninstall")
    assert res.returncode == 0, res.stderr
    assert (hooks / "pre-push").read_text() == legacy_push
    assert (hooks / "post-commit").read_text() == legacy_commit
    assert not (hooks / "post-merge").exists()
    assert not list(hooks.glob("*.forge-legacy"))
    assert "restored your pre-push hook" in res.stdout and "removed " in res.stdout
    nothing = hooks_of(repo)
    for hook in nothing.iterdir():
        hook.unlink()
    again = run_forge(repo, "hooks", "uninstall")
    assert again.returncode == 0
    assert again.stdout == f"no forge hooks in {nothing}: nothing to remove\n"


def test_install_refuses_when_legacy_name_is_taken(repo: Path) -> None:
    hooks = hooks_of(repo)
    (hooks / "pre-push").write_text("#!/bin/sh\nexit 0\n")
    (hooks / "pre-push.forge-legacy").write_text("#!/bin/sh\nexit 1\n")
    res = run_forge(repo, "hooks", "install")
    assert res.returncode == 2
    assert "pre-push.forge-legacy already exists" in res.stderr
    assert not (hooks / "post-commit").exists()  # nothing was installed


def test_install_follows_core_hookspath(repo: Path) -> None:
    git(repo, "config", "core.hooksPath", "githooks")
    res = run_forge(repo, "hooks", "install")
    assert res.returncode == 0, res.stderr
    assert (repo / "githooks" / "pre-push").exists()
    assert not (hooks_of(repo) / "pre-push").exists()
    assert run_forge(repo, "hooks", "uninstall").returncode == 0
    assert not (repo / "githooks" / "pre-push").exists()


def test_install_leaves_a_hook_managers_hooks_alone(repo: Path) -> None:
    # husky: core.hooksPath=.husky/_ holds its own scripts, told apart by basename "$0".
    managed = repo / ".husky" / "_"
    managed.mkdir(parents=True)
    husky = '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n'
    (managed / "pre-push").write_text(husky)
    (managed / "pre-push").chmod(0o755)
    git(repo, "config", "core.hooksPath", ".husky/_")
    res = run_forge(repo, "hooks", "install")
    assert res.returncode == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "core.hooksPath=.husky/_" in lines[0]
    assert 'forge.hooks pre-push "$0" "$@"' in lines[0]
    assert sorted(p.name for p in managed.iterdir()) == ["pre-push"]  # nothing renamed
    assert (managed / "pre-push").read_text() == husky

    # An empty hooksPath folder (or one without these hooks) is forge's to fill.
    (managed / "pre-push").unlink()
    res = run_forge(repo, "hooks", "install")
    assert res.returncode == 0, res.stderr
    assert "forge.hooks pre-push" in (managed / "pre-push").read_text()
    assert run_forge(repo, "hooks", "install").returncode == 0  # updating its own is fine


def test_hookspath_that_is_not_a_folder_is_one_line(repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "core.hooksPath", "/dev/null")
    res = run_forge(repo, "hooks", "install")
    assert res.returncode == 2
    assert res.stderr.startswith("forge: hooks are disabled by core.hooksPath=/dev/null")
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    afile = tmp_path / "afile"
    afile.write_text("x")
    git(repo, "config", "core.hooksPath", str(afile / "hooks"))
    res = run_forge(repo, "hooks", "install")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "hooks are disabled by core.hooksPath=" in res.stderr


@pytest.mark.slow
def test_pre_push_blocks_a_failing_tip_then_allows_a_fixed_one(repo: Path, remote: Path) -> None:
    assert run_forge(repo, "hooks", "install").returncode == 0
    configure(repo, {"unit": "echo broken; exit 1"})
    blocked = push(repo, "main")
    assert blocked.returncode != 0
    assert "FAIL" in blocked.stderr and "push blocked" in blocked.stderr
    assert "unit-1.log" in blocked.stderr
    assert remote_head(remote) is None

    fixed = configure(repo, {"unit": "echo fine"})
    allowed = push(repo, "main")
    assert allowed.returncode == 0, allowed.stderr
    assert "PASS" in allowed.stderr
    assert remote_head(remote) == fixed

    broken = configure(repo, {"unit": "exit 1"})
    skipped = push(repo, "main", env={"FORGE_SKIP_VERIFY": "1"})
    assert skipped.returncode == 0, skipped.stderr
    assert "FORGE_SKIP_VERIFY=1: pushing without verification" in skipped.stderr
    assert remote_head(remote) == broken


@pytest.mark.usefixtures("remote")
def test_pre_push_answers_from_the_cache(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    assert run_forge(repo, "hooks", "install").returncode == 0
    configure(repo, {"unit": f"echo run >> {marker}"})
    assert run_forge(repo, "verify").returncode == 0
    wait_for(lambda: verify_bg.running(discover(repo)) is None, what="background to end")
    runs = marker.read_text()
    res = push(repo, "main")
    assert res.returncode == 0, res.stderr
    assert "remembered verdict" in res.stderr
    assert marker.read_text() == runs


@pytest.mark.usefixtures("remote")
def test_pre_push_without_config_is_unverified(repo: Path) -> None:
    assert run_forge(repo, "hooks", "install").returncode == 0
    res = push(repo, "main")
    assert res.returncode == 0, res.stderr
    assert "UNVERIFIED" in res.stderr


@pytest.mark.usefixtures("unboxed")  # it writes down `$$`
def test_newer_commit_supersedes_background_verification(repo: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    assert run_forge(repo, "hooks", "install").returncode == 0
    first = configure(repo, {"slow": f"sh {FAKES / 'verify_pids.sh'} {pids}"})
    wait_for(lambda: len(list(pids.glob("*.pid"))) == 1, what="the first lane to start")
    (old_pid,) = [int(p.read_text()) for p in pids.glob("*.pid")]
    r = discover(repo)
    current = verify_bg.running(r)
    assert current is not None and current.commit == first
    old_owner = current.owner

    (repo / "next.txt").write_text("next\n")
    second = commit_all(repo, "next")  # post-commit returns without waiting
    wait_for(lambda: len(list(pids.glob("*.pid"))) == 2, what="the second lane to start")
    new_pid = next(int(p.read_text()) for p in pids.glob("*.pid") if int(p.read_text()) != old_pid)
    assert (pids / f"{new_pid}.alive").read_text().strip() == ""  # the old lane was gone
    assert not running(old_pid)
    assert not old_owner.alive()
    current = verify_bg.running(r)
    assert current is not None and current.commit == second
    records = [read_json(p) for p in (r.state.verify_dir / "records").glob("*.json")]
    assert any(d["commit"] == first and d["verdict"] == "INTERRUPTED" for d in records)


def test_commits_in_forge_task_worktrees_leave_background_verification_alone(
    repo: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    assert run_forge(repo, "hooks", "install").returncode == 0
    first = configure(repo, {"slow": f"sh {FAKES / 'verify_pids.sh'} {pids}"})
    wait_for(lambda: len(list(pids.glob("*.pid"))) == 1, what="the first lane to start")
    r = discover(repo)
    current = verify_bg.running(r)
    assert current is not None and current.commit == first

    # An agent committing with forge's variables set, anywhere.
    (repo / "agent.txt").write_text("agent\n")
    git(repo, "add", "-A")
    subprocess.run(
        ["git", "commit", "-q", "-m", "agent"],
        cwd=repo,
        check=True,
        env={**os.environ, "FORGE_TASK": "t1"},
    )
    # A commit in a worktree under forge's worktrees root, without the variables.
    wt = r.worktrees_root() / "p" / "t2"
    git(repo, "worktree", "add", "-q", "-b", "forge/p/t2", str(wt))
    (wt / "task.txt").write_text("task\n")
    task_commit = commit_all(wt, "task")
    git(wt, "merge", "-q", "--no-edit", "main")  # post-merge too (a no-op merge or not)

    still = verify_bg.running(r)
    assert still is not None and still.owner == current.owner and still.commit == first
    assert len(list(pids.glob("*.pid"))) == 1
    request = read_json(r.state.verify_dir / "background-request.json")
    assert request["commit"] == first, task_commit
