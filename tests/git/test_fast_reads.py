"""What forge reads without a git process gives git's own answer: a branch as its
loose file (git still answers for a packed, symbolic or absent one), one
`merge-base` for a merge's two questions, the tree of a commit forge wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git

from forge.git import known, worktrees
from forge.git.merge import UNRELATED, merge_onto, shares_history
from forge.git.repo import Repository, discover


def _slot_commit(repo: Path, text: str) -> tuple[Repository, Path, str, str]:
    """A slot at the repository's HEAD with `text` in a.txt committed by forge on the
    task branch forge/p/t1: the repository, the slot, the base and the commit."""
    r = discover(repo)
    base = git(repo, "rev-parse", "HEAD").strip()
    slot = Path(os.environ["FORGE_WORKTREES"]) / "slot"
    worktrees.add(r, slot, base)
    (slot / "a.txt").write_text(text)
    return r, slot, base, worktrees.commit_all(r, slot, "work", branch="refs/heads/forge/p/t1")


def test_a_ref_reads_as_git_resolves_it(repo: Path) -> None:
    r = discover(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", "refs/heads/forge/p/t1", head)
    assert r.ref_value("refs/heads/forge/p/t1") == head
    git(repo, "pack-refs", "--all")  # packed: no loose file any more
    assert not (repo / ".git" / "refs" / "heads" / "forge" / "p" / "t1").exists()
    assert r.ref_value("refs/heads/forge/p/t1") == head
    git(repo, "symbolic-ref", "refs/forge/link", "refs/heads/forge/p/t1")
    assert r.ref_value("refs/forge/link") == head
    git(repo, "update-ref", "-d", "refs/heads/forge/p/t1")
    assert r.ref_value("refs/heads/forge/p/t1") is None
    assert r.ref_value("refs/heads/forge/absent") is None
    assert r.ref_value("HEAD") == head
    # Packed and not loose, beside one that is neither: git's answer for each.
    git(repo, "update-ref", "refs/heads/forge/p/t2", head)
    git(repo, "pack-refs", "--all")
    assert r.ref_value("refs/heads/forge/p/t2") == head
    assert r.ref_value("refs/heads/forge/p/t") is None  # a prefix of a packed one
    assert r.ref_value("refs/heads/forge/p/t3") is None


def test_a_merge_onto_the_commits_parent_is_the_commits_tree(repo: Path) -> None:
    """A task's commit forge made right on the integration head: its merge is
    written without asking git for a merge base or a merged tree."""
    r, _, base, work = _slot_commit(repo, "a\n")
    assert known.child_of(work, base)
    res = merge_onto(r, base, work, message="m")
    assert res.merged and not res.already and res.commit
    assert git(repo, "rev-parse", f"{res.commit}^{{tree}}") == git(
        repo, "rev-parse", f"{work}^{{tree}}"
    )
    assert git(repo, "rev-parse", f"{res.commit}^1", f"{res.commit}^2").split() == [base, work]


def test_one_merge_base_tells_merged_unrelated_and_mergeable(repo: Path) -> None:
    r = discover(repo)
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "a.txt").write_text("a\n")
    work = commit_all(repo, "work").strip()
    assert merge_onto(r, work, base, message="m").already  # base is already in work
    res = merge_onto(r, base, work, message="m")
    assert res.merged and not res.already and res.commit
    assert known.tree(res.commit) == git(repo, "rev-parse", f"{res.commit}^{{tree}}").strip()
    assert shares_history(r, res.commit, base)
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    orphan = git(repo, "commit-tree", tree, "-m", "no parent").strip()
    refused = merge_onto(r, base, orphan, message="m")
    assert not refused.merged and refused.refused == UNRELATED
    assert not shares_history(r, base, orphan)


def test_a_fresh_commit_merges_with_no_merge_base_and_still_tells_the_rest(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit forge has just written is in no branch yet: merged onto a moved head
    by `merge-tree` alone; a conflict is still told, and a fresh commit on an
    unrelated history still refused as one, and a merged one is never merged twice."""
    from forge.base import proc

    r, slot, base, work = _slot_commit(repo, "task\n")
    (repo / "b.txt").write_text("moved on\n")
    moved = commit_all(repo, "elsewhere").strip()

    calls: list[str] = []
    real = proc.run

    def spy(argv: list[str], **kw: object) -> proc.Completed:
        calls.append(" ".join(argv[1:3]))
        return real(argv, **kw)  # type: ignore[arg-type]

    with monkeypatch.context() as mp:
        mp.setattr(proc, "run", spy)
        res = merge_onto(r, moved, work, message="m")
    assert res.merged and res.commit
    assert not any(c.startswith("merge-base") for c in calls), calls
    assert git(repo, "show", f"{res.commit}:a.txt") == "task"
    assert git(repo, "show", f"{res.commit}:b.txt") == "moved on"
    # Merged once: the same commit onto the merge is already in.
    assert merge_onto(r, res.commit, work, message="m").already
    # A fresh commit on a conflicting change is a conflict, not a refusal.
    worktrees.move(r, slot, "refs/heads/forge/p/t2", clean_all=False, commit=base)
    (slot / "b.txt").write_text("task's own\n")
    clash = worktrees.commit_all(r, slot, "clash", branch="refs/heads/forge/p/t2")
    conflict = merge_onto(r, moved, clash, message="m")
    assert not conflict.merged and conflict.conflicts == ("b.txt",)
    # forge's commit on a parentless one the task made: git refuses, forge says why.
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    orphan = git(repo, "commit-tree", tree, "-m", "no parent").strip()
    worktrees.move(r, slot, "refs/heads/forge/p/t3", clean_all=False, commit=orphan)
    (slot / "c.txt").write_text("c\n")
    lone = worktrees.commit_all(r, slot, "lone", branch="refs/heads/forge/p/t3")
    assert known.unmerged_own(lone)
    refused = merge_onto(r, moved, lone, message="m")
    assert not refused.merged and refused.refused == UNRELATED


def test_forges_head_in_a_slot_is_written_as_git_would(repo: Path) -> None:
    """forge's HEAD after a commit (on the slot's branch, or detached) is what `git
    update-ref HEAD` would have left: git reads the same commit."""
    from forge.git.contained import Contained

    r, slot, _, one = _slot_commit(repo, "detached\n")
    view = Contained(r, slot)
    assert view.git("rev-parse", "HEAD").strip() == one
    worktrees.move(r, slot, "refs/heads/forge/p/t1", clean_all=False, commit=one)
    assert view.git("symbolic-ref", "HEAD").strip() == "refs/heads/forge/p/t1"
    (slot / "a.txt").write_text("on its branch\n")
    two = worktrees.commit_all(r, slot, "two", branch="refs/heads/forge/p/t1")
    assert view.git("symbolic-ref", "HEAD").strip() == "refs/heads/forge/p/t1"
    assert view.git("rev-parse", "HEAD", "refs/heads/forge/p/t1").split() == [two, two]
    assert view.git("status", "--porcelain") == ""
    assert r.ref_value("refs/heads/forge/p/t1") == two
