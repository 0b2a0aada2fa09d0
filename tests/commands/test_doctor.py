"""`forge doctor` says what the sandbox holds on this machine, and what forge falls
back to where something is missing; it always exits 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import run_forge

from forge.base import box, sandbox


def test_doctor_says_what_the_sandbox_holds(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", "/nowhere/agent.sock")
    cp = run_forge(repo, "doctor")
    assert cp.returncode == 0, cp.stderr
    assert f"running as root: {'yes' if os.geteuid() == 0 else 'no'}" in cp.stdout
    data = json.loads(run_forge(repo, "doctor", "--json").stdout)
    assert "SSH_AUTH_SOCK" in data["dropped_variables"]
    if sandbox.unavailable() is None:
        assert "capabilities inside the sandbox: none" in cp.stdout
        assert data["capabilities_kept"] == {} and data["namespaces"]["pid"] is True
        assert "/run" in data["hidden"]


def test_doctor_without_bubblewrap_names_the_fallback(repo: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git_bin = shutil.which("git")
    assert git_bin is not None
    (bin_dir / "git").symlink_to(git_bin)
    cp = subprocess.run(
        [sys.executable, "-m", "forge", "doctor"],
        cwd=repo,
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    assert "bubblewrap: not installed" in cp.stdout
    assert "fallback: no bubblewrap: `sandbox = true` is refused" in cp.stdout


def test_doctor_names_the_box_and_the_limit_where_no_namespace_can_be_made(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the sandbox, a command runs in a box where a namespace can be made;
    where none can (FORGE_BOX=off acts as if), the fallback and the limit are said."""
    cp = run_forge(repo, "doctor")
    assert cp.returncode == 0, cp.stderr
    data = json.loads(run_forge(repo, "doctor", "--json").stdout)
    if box.unavailable() is None:
        assert "without the sandbox: a box (pid and mount namespaces" in cp.stdout
        assert data["box"] is None
        assert "limit: without the sandbox a task runs as you, in a box that hides" in cp.stdout
    monkeypatch.setenv(box.BOX_VAR, "off")
    cp = run_forge(repo, "doctor")
    assert cp.returncode == 0, cp.stderr
    assert "without the sandbox: no box: FORGE_BOX=off says so" in cp.stdout
    assert "fallback: no box" in cp.stdout
    assert (
        "limit: without the sandbox a task runs as you and, with no namespace here, "
        "reads and writes forge's key and history (FORGE_BOX=off says so)"
    ) in cp.stdout
    assert json.loads(run_forge(repo, "doctor", "--json").stdout)["box"] == "FORGE_BOX=off says so"
