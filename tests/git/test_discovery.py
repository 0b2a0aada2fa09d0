"""Repository discovery: the main worktree is found from any worktree without listing
the worktrees, so it holds while other forge processes add worktrees."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from helpers.gitkit import git

from forge.git import worktrees
from forge.git.repo import discover


def _listed_main(path: Path) -> Path:
    out = git(path, "worktree", "list", "--porcelain")
    return Path(out.splitlines()[0].removeprefix("worktree ")).resolve()


def test_the_main_worktree_is_found_from_anywhere(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    for start in (repo, repo / "src", linked):
        r = discover(start)
        assert r.main_root == repo.resolve() == _listed_main(start)
        assert r.common_dir == (repo / ".git").resolve()
    assert discover(linked).root == linked.resolve()
    assert worktrees.registered(discover(repo)) == [linked.resolve()]


def test_a_separate_git_dir_is_found_as_git_finds_it(tmp_path: Path) -> None:
    main = tmp_path / "main"
    git(
        tmp_path,
        "init",
        "-q",
        "-b",
        "main",
        "--separate-git-dir",
        str(tmp_path / "g.git"),
        str(main),
    )
    git(main, "commit", "-q", "--allow-empty", "-m", "first")
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "--detach", str(linked))
    assert discover(main).main_root == main.resolve()
    assert discover(linked).main_root == _listed_main(linked)


@pytest.mark.slow
def test_discovery_holds_while_worktrees_are_being_added(repo: Path, tmp_path: Path) -> None:
    """`git worktree list` fails ("failed to read .git/worktrees/X/commondir") while a
    worktree is half made; discovery and clean's listing must not."""
    adder = subprocess.Popen(
        [
            "sh",
            "-c",
            f'for i in $(seq 1 200); do git worktree add -q --detach "{tmp_path}/w$i"; done',
        ],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    calls = 0
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and adder.poll() is None:
            r = discover(repo)
            assert r.main_root == repo.resolve()
            assert all(p.parent == tmp_path for p in worktrees.registered(r))
            calls += 1
    finally:
        adder.kill()
        adder.wait()
    assert calls > 20, "the worktrees were all added before discovery was hammered"
