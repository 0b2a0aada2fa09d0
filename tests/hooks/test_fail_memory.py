"""A confirmed FAIL is remembered per (tree, verification config) like a PASS: a push
of the same broken commit is blocked from its verdict, naming the failing tests,
without running anything; `forge verify --force` runs it again. A failure that
might be a flake (not confirmed by a rerun) is not remembered."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge

BROKEN = "echo run >> {runs}; echo 'FAILED tests/test_x.py::test_y - AssertionError: no'; exit 1"


@pytest.fixture
def remote(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    return bare


def _configure(repo: Path, runs: Path, *, reruns: int) -> None:
    lane = json.dumps(BROKEN.format(runs=runs))
    (repo / "forge.toml").write_text(
        f"[verify]\nreruns = {reruns}\n[verify.lanes]\nunit = {lane}\n"
    )
    git(repo, "add", "-A")
    # committed without the hooks: no background verification runs beside the test's
    git(repo, "-c", "core.hooksPath=/nonexistent", "commit", "-q", "-m", "verify config")
    assert run_forge(repo, "hooks", "install").returncode == 0


def _push(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "origin", "main"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


def _count(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


@pytest.mark.usefixtures("remote")
def test_a_push_of_a_confirmed_failure_is_blocked_from_its_verdict(
    repo: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    _configure(repo, runs, reruns=0)
    assert run_forge(repo, "verify").returncode == 5
    assert _count(runs) == 1
    blocked = _push(repo)
    assert blocked.returncode != 0 and "remembered verdict" not in blocked.stderr
    assert _count(runs) == 2  # verified again: unconfirmed, it might have been a flake

    runs.unlink()
    _configure(repo, runs, reruns=1)
    first = run_forge(repo, "verify")
    assert first.returncode == 5, first.stdout + first.stderr
    assert _count(runs) == 2  # failed, and failed again: confirmed
    blocked = _push(repo)
    assert blocked.returncode != 0
    assert "FAIL (remembered verdict): push blocked" in blocked.stderr, blocked.stderr
    assert "failed: tests/test_x.py::test_y (AssertionError: no)" in blocked.stderr
    assert _count(runs) == 2  # nothing ran
    again = run_forge(repo, "verify")
    assert again.returncode == 5 and "remembered verdict" in again.stdout + again.stderr
    assert _count(runs) == 2
    forced = run_forge(repo, "verify", "--force")
    assert forced.returncode == 5
    assert _count(runs) == 4
