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
from forge.base.netns import pasta
from forge.commands import doctor


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


def test_doctor_says_what_each_role_reaches(repo: Path) -> None:
    data = json.loads(run_forge(repo, "doctor", "--json").stdout)
    assert set(data["reach"]) == {"agent", "setup", "check", "lane"}
    if sandbox.unavailable() is not None:
        return
    assert data["reach"]["check"].startswith("nothing unless it says `network = true`")
    if pasta.unavailable() is None:
        assert "network of its own" in data["reach"]["agent"]
        assert "`host_ports`" in data["reach"]["agent"]
    else:
        assert "abstract unix sockets" in data["reach"]["agent"]
        assert any("keeps the host's network" in line for line in data["fallbacks"])


def test_without_pasta_an_agent_keeps_the_hosts_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "pasta" else f"/x/{name}")
    assert pasta.unavailable() is not None and "pasta" in str(pasta.unavailable())
    reach = doctor.reach(True)
    assert "the host's network namespace" in reach["agent"]
    assert "pasta" in reach["agent"]
    assert doctor.limits(True)[0] == doctor.LIMITS[0]


@pytest.mark.parametrize("layers", ["on", "off"])
def test_doctor_names_how_verification_checkouts_are_made(
    repo: Path, monkeypatch: pytest.MonkeyPatch, layers: str
) -> None:
    monkeypatch.setenv("FORGE_LAYERS", layers)
    cp = run_forge(repo, "doctor")
    assert cp.returncode == 0, cp.stderr
    if layers == "off":
        assert "verification checkouts: checkouts (FORGE_LAYERS=off)" in cp.stdout
    else:
        said = [line for line in cp.stdout.splitlines() if line.startswith("verification")]
        assert said, cp.stdout
        # layers where an overlay mounts here; `on` where it cannot is refused, said why
        assert said[0].startswith(
            (
                "verification checkouts: layers (an overlay per run",
                "verification checkouts: refused",
            )
        )
    data = json.loads(run_forge(repo, "doctor", "--json").stdout)
    assert data["checkouts"].startswith("verification checkouts: ")


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
