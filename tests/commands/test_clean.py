"""Disk and cleanup: `forge status` shows each plan's worktrees and their disk use,
`forge clean --all` clears every plan (salvaging what never merged), and no
command leaves temporary files behind, however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import spawn_forge, state, wait_for, write_plan

from forge.base.files import atomic_write_text, sweep_temp_files

# `a` merges, `bad` fails and keeps its worktree and branch.
MIXED = """
max_parallel = 2
[[task]]
id = "a"
run = "echo a > {p}-a.txt"
files = ["{p}-a.txt"]

[[task]]
id = "bad"
run = "echo half-done > {p}-bad.txt; exit 1"
files = ["{p}-bad.txt"]
"""


def _run_mixed(repo: Path, tmp_path: Path, name: str = "p") -> None:
    plan = write_plan(tmp_path, MIXED.format(p=name), name=name)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "run", name)
    assert cp.returncode == 5, cp.stdout + cp.stderr


def temp_files() -> list[Path]:
    """Temporary files forge may write: atomic-write temps and salvage indexes."""
    roots = [Path(os.environ["FORGE_WORKTREES"])]
    found = []
    for root in roots:
        found += [p for p in root.rglob("*") if _is_temp(p)]
    return found


def _is_temp(p: Path) -> bool:
    return p.name.endswith(".tmp") or p.name.startswith(".forge-salvage-index")


def forge_temp_files(repo: Path) -> list[Path]:
    return [p for p in (repo / ".git/forge").rglob("*") if _is_temp(p)] + temp_files()


@pytest.mark.slow
def test_status_shows_worktrees_and_disk_use(repo: Path, tmp_path: Path) -> None:
    _run_mixed(repo, tmp_path)
    cp = run_forge(repo, "status", "--json")
    assert cp.returncode == 0, cp.stderr
    data = json.loads(cp.stdout)
    slots = {s["task"]: s for s in data["slots"]}
    assert slots["bad"]["exists"] and slots["bad"]["bytes"] > 0
    assert Path(slots["bad"]["path"]).is_dir()
    text = run_forge(repo, "status").stdout
    assert "worktrees (" in text and slots["bad"]["path"] in text
    assert "holds bad" in text and ("KiB" in text or " B " in text)


@pytest.mark.slow
def test_clean_all_clears_every_plan(repo: Path, tmp_path: Path) -> None:
    _run_mixed(repo, tmp_path, "p")
    _run_mixed(repo, tmp_path, "q")
    paths = [Path(s["path"]) for plan in "pq" for s in state(repo, plan)["slots"].values()]
    assert paths and all(p.is_dir() for p in paths)
    cp = run_forge(repo, "clean", "--all")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not [p for p in paths if p.exists()], "a worktree survived clean --all"
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    for plan in "pq":
        assert not git(repo, "for-each-ref", f"refs/heads/forge/{plan}/"), "task branches stay"
        refs = git(repo, "for-each-ref", "--format=%(refname)", f"refs/forge/salvage/{plan}/")
        assert refs, f"{plan}'s failed work was not salvaged"
        for ref in refs.split():
            assert ref in cp.stdout, f"salvage ref {ref} is not named"
            assert git(repo, "show", f"{ref}:{plan}-bad.txt") == "half-done"
    assert not forge_temp_files(repo)
    # the user's branch never moved, and the integration branches (not accepted) stay
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert "kept branch forge/p-integration" in cp.stdout


@pytest.mark.slow
def test_no_temporary_files_after_success_failure_or_sigint(repo: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    body = MIXED.format(p="p") + (
        '\n[[task]]\nid = "hang"\n'
        f"run = '''if [ -f {started} ]; then echo h > h.txt; exit 0; fi; touch {started}; "
        "sleep 600'''\n"
        'files = ["h.txt"]\n'
    )
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    p = spawn_forge(repo, "run", env={"FORGE_GRACE": "0.5"})
    wait_for(started.exists, what="hang started")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    assert not forge_temp_files(repo), "SIGINT left temporary files"
    cp = run_forge(repo, "run")  # `bad` fails again, `hang` finishes
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert not forge_temp_files(repo), "a failed run left temporary files"
    assert run_forge(repo, "clean").returncode == 0
    assert not forge_temp_files(repo), "clean left temporary files"
    # a refused command too
    assert run_forge(repo, "retry", "nosuch").returncode == 2
    assert not forge_temp_files(repo)


@pytest.mark.slow
def test_a_killed_writers_temp_file_is_swept(tmp_path: Path, repo: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    d = tmp_path / "state"
    atomic_write_text(d / "state.json", "{}\n")
    stale = d / f".state.json.{dead.pid}.abcd1234.tmp"
    live = d / f".state.json.{os.getpid()}.efgh5678.tmp"
    other = d / ".unrelated.tmp"
    for p in (stale, live, other):
        p.write_text("half")
    assert sweep_temp_files(d) == [stale]
    assert live.exists() and other.exists() and (d / "state.json").read_text() == "{}\n"
    # the next run of a plan sweeps what a killed run left in its folder
    plan = write_plan(tmp_path, '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n')
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    assert run_forge(repo, "run").returncode == 0
    slot_dir = Path(next(iter(state(repo)["slots"].values()))["path"]).parent
    left = [
        repo / f".git/forge/plans/p/.state.json.{dead.pid}.zz99zz99.tmp",
        slot_dir / f".forge-salvage-index-{dead.pid}",
    ]
    for p in left:
        p.write_text("{")
    mine = slot_dir / f".forge-salvage-index-{os.getpid()}"  # a live salvage: kept
    mine.write_text("{")
    assert run_forge(repo, "run").returncode == 0
    assert not [p for p in left if p.exists()], "a killed run's temp files were not swept"
    assert mine.exists()
    mine.unlink()
    assert not forge_temp_files(repo)


def _empty_folders(*roots: Path) -> list[Path]:
    return [
        Path(d)
        for root in roots
        for d, dirs, files in os.walk(root)
        if not dirs and not files and Path(d) != root
    ]


def test_clean_skips_a_branch_checked_out_in_a_worktree(repo: Path, tmp_path: Path) -> None:
    _run_mixed(repo, tmp_path)
    mine = tmp_path / "mine"
    git(repo, "worktree", "add", "-q", str(mine), "forge/p/a")  # merged: no slot holds it
    head = git(repo, "rev-parse", "forge/p/a")
    cp = run_forge(repo, "clean")
    assert cp.returncode == 0, cp.stderr
    assert f"kept branch forge/p/a: it is checked out in {mine}" in cp.stdout
    assert "deleted branch forge/p/bad" in cp.stdout
    assert git(repo, "rev-parse", "forge/p/a") == head
    assert git(mine, "symbolic-ref", "HEAD") == "refs/heads/forge/p/a"


def test_clean_skips_the_branch_the_user_is_on(repo: Path, tmp_path: Path) -> None:
    _run_mixed(repo, tmp_path)
    git(repo, "checkout", "-q", "forge/p-integration")
    cp = run_forge(repo, "clean")
    assert cp.returncode == 0, cp.stderr
    assert f"kept branch forge/p-integration: it is checked out in {repo}" in cp.stdout
    assert git(repo, "symbolic-ref", "HEAD") == "refs/heads/forge/p-integration"


def test_clean_leaves_no_empty_folders(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'verify = "true"\n' + MIXED.format(p="p"))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    assert run_forge(repo, "run").returncode == 5
    root = Path(os.environ["FORGE_WORKTREES"])
    assert (root / repo.name / ".verify").is_dir()
    cp = run_forge(repo, "clean")
    assert cp.returncode == 0, cp.stderr
    assert _empty_folders(root, repo / ".git" / "forge") == []
    assert not (root / repo.name).exists()


def test_clean_removes_the_default_worktrees_folder_when_empty(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORGE_WORKTREES")
    _run_mixed(repo, tmp_path)
    default = repo.parent / ".forge-worktrees"
    assert default.is_dir()
    assert run_forge(repo, "clean").returncode == 0
    assert not default.exists()
