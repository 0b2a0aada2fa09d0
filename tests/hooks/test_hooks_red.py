"""The pre-push hook and a red base: a push whose only failing tests fail on the
remote's old tip too is allowed (`gate_on = "regressions"`); a new failure still
blocks it. A flaky or quarantined test is named."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.suites import FLAKY, PYTEST, pytest_suite

from forge.git.repo import discover
from forge.verify import background as verify_bg

PY = shlex.quote(sys.executable)
SUITE = """\
import pathlib

ROOT = pathlib.Path(__file__).parent.parent


def test_red():
    assert (ROOT / "fix.txt").exists()


def test_guard():
    assert not (ROOT / "culprit.txt").exists()
"""


@pytest.fixture(autouse=True)
def no_background_left(repo: Path) -> Iterator[None]:
    """Stop (as a newer commit would) whatever background verification a test left."""
    yield
    current = verify_bg.running(discover(repo))
    if current is not None:
        verify_bg.supersede(current, log=lambda *_a: None)


def push(repo: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "origin", "main"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.timeout(600)
def test_pre_push_allows_a_push_whose_failures_the_remote_has(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    command = f"env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -q -p no:cacheprovider"
    (repo / "forge.toml").write_text(f"[verify]\nreruns = 0\ncommand = {json.dumps(command)}\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_suite.py").write_text(SUITE)
    (repo / ".gitignore").write_text("__pycache__/\n")
    commit_all(repo, "a red suite")
    assert run_forge(repo, "hooks", "install").returncode == 0
    seeded = push(repo, {"FORGE_SKIP_VERIFY": "1"})
    assert seeded.returncode == 0, seeded.stderr
    (repo / "note.txt").write_text("a note\n")
    commit_all(repo, "an innocent change")
    allowed = push(repo)
    assert allowed.returncode == 0, allowed.stderr
    assert "already failing on the remote's" in allowed.stderr
    assert "tests/test_suite.py::test_red" in allowed.stderr
    (repo / "culprit.txt").write_text("breaks the guard\n")
    commit_all(repo, "a culprit")
    blocked = push(repo)
    assert blocked.returncode != 0
    assert "push blocked" in blocked.stderr and "test_guard" in blocked.stderr
    # Which failures the push brings, and which the remote has already.
    said = [line for line in blocked.stderr.splitlines() if line.startswith("forge:   failed")]
    old = git(repo, "rev-parse", "--short=12", "origin/main")
    assert [line.split("):")[0] + ")" for line in said] == [
        "forge:   failed (new)",
        f"forge:   failed (also failing on the remote's {old})",
    ], said
    assert "test_guard" in said[0] and "test_red" in said[1]


@pytest.mark.timeout(600)
def test_pre_push_names_a_flaky_and_a_quarantined_test(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    pytest_suite(repo, tmp_path / "n", "FPF")
    (repo / "forge.toml").write_text(f"[verify]\nreruns = 1\ncommand = {json.dumps(PYTEST)}\n")
    commit_all(repo, "forge.toml")
    assert run_forge(repo, "hooks", "install").returncode == 0
    # Failed, then passed when run again: FLAKY, named.
    flaky = push(repo)
    assert flaky.returncode == 0, flaky.stderr
    assert f"FLAKY (flaky: {FLAKY})" in flaky.stderr, flaky.stderr
    # It fails again on the next commit: quarantined, named, and the push goes.
    (repo / "note.txt").write_text("a note\n")
    commit_all(repo, "a note")
    held = push(repo)
    assert held.returncode == 0, held.stderr
    assert f"PASS (1 deselected: {FLAKY} (quarantined, flaky))" in held.stderr, held.stderr
