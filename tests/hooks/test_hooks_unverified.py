"""Hooks that would verify nothing say so: `forge hooks install` warns (and says what
to add), a commit says it once; `[verify]` in forge.toml takes `setup` and `env`
as a plan means them, run in forge's checkout and again when they change."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.gitkit import commit_all, git, run_forge


def _commit(repo: Path, name: str) -> subprocess.CompletedProcess[str]:
    (repo / name).write_text(name)
    git(repo, "add", name)
    return subprocess.run(
        ["git", "commit", "-q", "-m", name], cwd=repo, capture_output=True, text=True, check=True
    )


def test_hooks_without_verify_warn_at_install_and_once_at_a_commit(repo: Path) -> None:
    cp = run_forge(repo, "hooks", "install")
    assert cp.returncode == 0, cp.stderr
    assert "installed" in cp.stdout
    assert cp.stderr.startswith("forge: warning: no [verify] in forge.toml, so each commit ")
    assert 'command = "pytest -q"' in cp.stderr and cp.stderr.count("\n") == 1
    first = _commit(repo, "one.txt")
    assert "no verification configured, so this commit is not verified" in first.stderr
    assert 'command = "pytest -q"' in first.stderr
    assert "verif" not in _commit(repo, "two.txt").stderr  # said once
    (repo / "forge.toml").write_text('[verify]\ncommand = "true"\n')
    commit_all(repo, "verify config")
    cp = run_forge(repo, "hooks", "install")
    assert cp.returncode == 0 and cp.stderr == "", cp.stderr


def test_verify_setup_and_env_from_forge_toml(repo: Path, tmp_path: Path) -> None:
    runs = tmp_path / "setup-runs"
    setup = (
        f"echo run >> {runs}; mkdir -p .tools/bin; "
        "printf '#!/bin/sh\\necho checked $GREETING\\n' > .tools/bin/mycheck; "
        "chmod +x .tools/bin/mycheck"
    )
    toml = (
        f"[verify]\ncommand = 'mycheck'\nsetup = {setup!r}\n"
        'env = { PATH = "{worktree}/.tools/bin:$PATH", GREETING = "hello" }\n'
    )
    (repo / ".gitignore").write_text(".tools/\n")
    (repo / "forge.toml").write_text(toml)
    commit_all(repo, "verify with a setup")
    cp = run_forge(repo, "verify")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "PASS" in cp.stdout and runs.read_text().count("run") == 1
    logs = [p.read_text() for p in (repo / ".git/forge/verify/logs").rglob("*.log")]
    assert any("checked hello" in text for text in logs)  # env reached the lane
    # the same setup in the same checkout does not run again; a changed one does
    (repo / "x.txt").write_text("x")
    commit_all(repo, "another commit")
    assert run_forge(repo, "verify").returncode == 0
    assert runs.read_text().count("run") == 1
    (repo / "forge.toml").write_text(toml.replace("hello", "again"))
    commit_all(repo, "a changed env")
    assert run_forge(repo, "verify").returncode == 0
    assert runs.read_text().count("run") == 2
    # a bad value is a problem at its line
    (repo / "forge.toml").write_text("[verify]\ncommand = 'true'\nenv = 3\n")
    cp = run_forge(repo, "verify")
    assert cp.returncode == 2 and "forge.toml:3: [verify]: env must be a table" in cp.stderr


def test_the_pre_push_block_names_each_failing_test(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    summary = tmp_path / "summary.txt"
    summary.write_text(
        "FAILED tests/test_calc.py::test_add - assert 1 == 2\n"
        "FAILED tests/test_calc.py::test_sub - ValueError: bad value 42\n"
        "2 failed, 3 passed in 0.12s\n"
    )
    (repo / "forge.toml").write_text(f"[verify]\nreruns = 0\ncommand = 'cat {summary}; exit 1'\n")
    commit_all(repo, "a failing verification")
    assert run_forge(repo, "hooks", "install").returncode == 0
    cp = subprocess.run(
        ["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True, timeout=120
    )
    assert cp.returncode != 0 and "push blocked" in cp.stderr, cp.stderr
    assert "failed: tests/test_calc.py::test_add (assert 1 == 2)" in cp.stderr
    assert "failed: tests/test_calc.py::test_sub (ValueError: bad value 42)" in cp.stderr
