"""A full disk pauses the run (exit 8) in one line naming the folder and the space
left there; once space is freed, the next `forge run` goes on and lands the task."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import statuses, write_plan


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MB file system of its own (a tmpfs: root only)."""
    where = tmp_path / "disk"
    where.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {made.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_pauses_the_run_and_the_next_run_goes_on(
    tmp_path: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = small_disk / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# test repo\n")
    commit_all(repo, "initial")
    monkeypatch.setenv("FORGE_WORKTREES", str(small_disk / "worktrees"))
    filler = small_disk / "filler"
    fill = (
        f"if [ ! -e {small_disk}/filled ]; then touch {small_disk}/filled; "
        f"head -c 64M /dev/zero > {filler} 2>/dev/null; fi; echo a > a.txt"
    )
    plan = write_plan(tmp_path, f"[[task]]\nid = \"a\"\nfiles = [\"a.txt\"]\nrun = '''{fill}'''\n")
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "run")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stderr, cp.stderr
    said = [line for line in cp.stderr.splitlines() if line.startswith("forge: ")]
    assert len(said) == 1, cp.stderr
    assert said[0].startswith("forge: paused: no space left on the device in "), said
    assert " free there)" in said[0] and str(small_disk) in said[0], said
    os.unlink(filler)
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}
