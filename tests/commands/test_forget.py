"""Cleaning up after a plan: `forge clean --dry-run` says and removes nothing,
`forge clean --all` takes the checkouts no plan owns too, `forge forget` drops a
cleaned plan's record, and `forge status --disk` counts everything of the
repository's."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import plan_and_run, state, write_plan

MIXED = """
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]

[[task]]
id = "bad"
run = "echo half-done > bad.txt; exit 1"
files = ["bad.txt"]
"""

ONE = """
[[task]]
id = "a"
run = "echo a > a.txt"
files = ["a.txt"]
"""


def _everything(repo: Path, root: Path) -> tuple[str, list[str]]:
    """The refs, and each file with its size and modification time."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    files = []
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        files.append(f"{path} {st.st_size} {st.st_mtime_ns}")
    return refs, files


def test_clean_dry_run_says_and_removes_nothing(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, MIXED))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    for slot in state(repo)["slots"].values():  # a stale index, which `git status` refreshes
        for tracked in Path(slot["path"]).glob("*.txt"):
            os.utime(tracked, ns=(1, 1))
    before = _everything(repo, tmp_path.parent)
    cp = run_forge(repo, "clean", "p", "--dry-run")
    assert cp.returncode == 0, cp.stderr
    assert _everything(repo, tmp_path.parent) == before
    out = cp.stdout
    assert "p: would salvage uncommitted work in" not in out  # the failed work is committed
    assert "p: would keep branch forge/p/bad's unmerged work in a ref, then delete it" in out
    assert "p: would delete branch forge/p/a" in out
    assert "p: would keep branch forge/p-integration: it holds work not accepted yet" in out
    assert "p: would remove task worktrees: " in out
    assert "removed" not in out and "deleted branch" not in out


def test_forget_drops_a_cleaned_plans_record(repo: Path, tmp_path: Path) -> None:
    assert plan_and_run(repo, write_plan(tmp_path, ONE)).returncode == 0
    cp = run_forge(repo, "forget", "p")
    assert cp.returncode == 2
    assert cp.stderr.strip() == (
        "forge: plan 'p' still has its integration branch forge/p-integration: "
        "`forge clean p` first (`forge clean p --dry-run` says what it removes)"
    )
    assert run_forge(repo, "accept").returncode == 0
    assert run_forge(repo, "clean").returncode == 0
    cp = run_forge(repo, "forget", "p")
    assert cp.returncode == 0, cp.stderr
    assert "forgot plan 'p'" in cp.stdout
    assert not (repo / ".git" / "forge" / "plans" / "p").exists()
    cp = run_forge(repo, "run")
    assert cp.returncode == 2 and "no plan recorded" in cp.stderr
    cp = run_forge(repo, "forget", "p")
    assert cp.returncode == 2 and "no plan named 'p' is recorded" in cp.stderr


def test_clean_all_removes_the_checkouts_no_plan_owns(repo: Path, tmp_path: Path) -> None:
    (repo / "forge.toml").write_text('[verify]\ncommand = "true"\n')
    commit_all(repo, "verify")
    assert run_forge(repo, "verify").returncode == 0
    checkouts = list(Path(os.environ["FORGE_WORKTREES"]).glob("*/.verify/*"))
    assert checkouts and all(p.is_dir() for p in checkouts)
    assert plan_and_run(repo, write_plan(tmp_path, ONE)).returncode == 0
    data = json.loads(run_forge(repo, "status", "--disk", "--json").stdout)
    whole = data["repository_disk"]
    plan_total = sum(data["disk"].values())
    assert whole["other checkouts"] > 0  # forge verify's, no plan's
    assert sum(whole.values()) > plan_total
    text = run_forge(repo, "status", "--disk").stdout
    assert "repository (measured now): " in text
    dry = run_forge(repo, "clean", "--all", "--dry-run")
    assert "would remove verification checkouts" in dry.stdout and all(
        p.is_dir() for p in checkouts
    )
    cp = run_forge(repo, "clean", "--all")
    assert cp.returncode == 0, cp.stderr
    assert "removed verification checkouts" in cp.stdout
    assert not [p for p in checkouts if p.exists()]
