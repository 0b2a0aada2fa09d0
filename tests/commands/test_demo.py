"""`forge demo`: the README's first command works end to end with no AI and no network."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    cp = run_forge(tmp_path, "demo", str(tmp_path / "d"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    repo = tmp_path / "d" / "calc"
    assert "deferred: overlaps `docs` on README.md" in cp.stdout
    assert "verification: PASS" in cp.stdout
    assert "not touched" in cp.stdout
    assert "forge report" in cp.stdout and "your own plan: copy " in cp.stdout
    assert git(repo, "log", "--format=%s", "-1", "main") == "calc: add()"  # user branch as made
    tree = git(repo, "ls-tree", "--name-only", "forge/demo-integration").split()
    assert {"CHANGELOG.md", "test_mul.py", "calc.py"} <= set(tree)
    status = run_forge(repo, "status", "--json")
    assert status.returncode == 0
    assert '"MERGED"' in status.stdout and '"PENDING"' not in status.stdout
    accept = run_forge(repo, "accept")
    assert accept.returncode == 0, accept.stderr
    assert "mul" in (repo / "calc.py").read_text()


def test_demo_refuses_a_used_folder(tmp_path: Path) -> None:
    (tmp_path / "d" / "calc").mkdir(parents=True)
    (tmp_path / "d" / "calc" / "x").write_text("mine")
    cp = run_forge(tmp_path, "demo", str(tmp_path / "d"))
    assert cp.returncode == 2
    assert "already exists" in cp.stderr and "Traceback" not in cp.stderr
