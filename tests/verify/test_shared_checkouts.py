"""`forge verify` outside a plan and the hooks verify with the same `[verify]`: they
share their checkouts (a pool keyed by setup and env), so `setup` is paid once, not
once per command that verifies."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from helpers.gitkit import git, run_forge


def _commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    # committed without the hooks: no background verification runs beside the test's
    git(repo, "-c", "core.hooksPath=/nonexistent", "commit", "-q", "-m", message)


def test_forge_verify_and_pre_push_share_one_setup(repo: Path, tmp_path: Path) -> None:
    setups = tmp_path / "setups"
    (repo / ".gitignore").write_text("made/\n")
    (repo / "forge.toml").write_text(
        f"[verify]\ncommand = 'test -f made/it'\nsetup = 'mkdir -p made && touch made/it "
        f"&& echo x >> {setups}'\n"
    )
    _commit(repo, "verify config")
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    assert run_forge(repo, "hooks", "install").returncode == 0
    first = run_forge(repo, "verify")
    assert first.returncode == 0, first.stdout + first.stderr
    assert setups.read_text().count("x") == 1
    (repo / "next.txt").write_text("next\n")
    _commit(repo, "next")  # a tree never verified
    pushed = subprocess.run(
        ["git", "push", "origin", "main"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert pushed.returncode == 0, pushed.stderr
    assert "PASS" in pushed.stderr
    assert setups.read_text().count("x") == 1  # the pre-push verified in the same checkout
    shared = [
        p.name for p in (Path(os.environ["FORGE_WORKTREES"]) / repo.name / ".verify").iterdir()
    ]
    assert len([n for n in shared if n.startswith("shared-")]) == 1, shared


def test_clean_pool_empties_the_shared_checkouts(repo: Path) -> None:
    (repo / "forge.toml").write_text("[verify]\ncommand = 'true'\n")
    _commit(repo, "verify config")
    assert run_forge(repo, "verify").returncode == 0
    root = Path(os.environ["FORGE_WORKTREES"]) / repo.name / ".verify"
    (member,) = root.glob("shared-*")
    cp = run_forge(repo, "clean", "--pool")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"pool: removed shared verification checkouts {member}" in cp.stdout
    assert not member.exists()
    again = run_forge(repo, "clean", "--pool")
    assert "pool: no shared verification checkouts: nothing to remove" in again.stdout
    assert run_forge(repo, "verify").returncode == 0  # made again when needed


def test_a_checkout_that_must_be_rebuilt_says_so(repo: Path, tmp_path: Path) -> None:
    setups = tmp_path / "setups"
    (repo / "forge.toml").write_text(f"[verify]\ncommand = 'true'\nsetup = 'echo x >> {setups}'\n")
    _commit(repo, "verify config")
    assert run_forge(repo, "verify").returncode == 0
    root = Path(os.environ["FORGE_WORKTREES"]) / repo.name / ".verify"
    (member,) = root.glob("shared-*")
    shutil.rmtree(member / "verify" / ".git")  # what a lane's `rm -rf .git` leaves
    cp = run_forge(repo, "verify", "--force")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    said = cp.stdout + cp.stderr
    assert f"lane verify: checkout {member / 'verify'} must be rebuilt: its `.git` is gone" in said
    assert setups.read_text().count("x") == 2  # made anew: its setup ran again
