"""Real git and the real CLI, as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def commit_all(repo: Path, message: str = "change") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def forge_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "forge", *args]


def run_forge(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would."""
    return subprocess.run(
        forge_cmd(*args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
