"""Hermetic verification checkouts: the judged commit plus what setup made, before
every run; index flags cleared; a lane that hides a change has changed its checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.gitkit import commit_all

from forge.git.repo import Repository, discover
from forge.plan.repo_config import VerifyConfig
from forge.verify import hermetic
from forge.verify.checkout import checkout_path
from forge.verify.engine import Verdict, verify_commit
from forge.verify.pool import pool_name


@pytest.fixture
def r(repo: Path) -> Repository:
    (repo / ".gitignore").write_text(".venv/\n*.pyc\n")
    commit_all(repo, "ignore")
    return discover(repo)


def cfg(lane: str, *, setup: str | None = None, reruns: int = 0) -> VerifyConfig:
    return VerifyConfig(lanes=(("unit", lane),), reruns=reruns, grace=0.5, setup=setup)


def test_setup_products_survive_and_nothing_else_does(r: Repository, tmp_path: Path) -> None:
    setups = tmp_path / "setups"
    setup = f"mkdir -p .venv && echo made > .venv/made && echo ran >> {setups}"
    # stray.pyc, left by the first run, is gone before the second one.
    lane = (
        "test -f .venv/made && test ! -e stray.pyc && mkdir -p .venv/__pycache__"
        " && touch stray.pyc .venv/__pycache__/cache.pyc"
    )
    config = cfg(lane, setup=setup)
    assert verify_commit(r, "HEAD", config, key="k").verdict == Verdict.PASS
    (r.root / "README.md").write_text("changed\n")
    commit_all(r.root, "another tree")
    assert verify_commit(r, "HEAD", config, key="k").verdict == Verdict.PASS
    assert setups.read_text() == "ran\n", "setup ran once: its .venv survived"
    co = checkout_path(r, f"{pool_name(config)}-1", "unit")  # the pool's first member
    assert (co / ".venv" / "__pycache__" / "cache.pyc").exists()  # Python's cache: kept


def test_a_rerun_starts_from_a_scrubbed_checkout(r: Repository, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    lane = (
        f"test ! -e stray.pyc || exit 3; touch stray.pyc; echo run >> {runs}; "
        f"test $(wc -l < {runs}) -ge 2"
    )
    rec = verify_commit(r, "HEAD", cfg(lane, reruns=1), key="k")
    assert rec.verdict == Verdict.FLAKY, [lane.lines() for lane in rec.lanes]


def test_a_lane_that_marks_a_file_assume_unchanged_changed_its_checkout(r: Repository) -> None:
    lane = "git update-index --assume-unchanged README.md && echo hidden > README.md"
    rec = verify_commit(r, "HEAD", cfg(lane, reruns=2), key="k")
    assert rec.verdict == Verdict.FAIL
    # The flag is set in the checkout's own `.git`, which forge's git never reads:
    # it hides nothing, and the edit itself is named.
    assert rec.lanes[0].reason == "changed the checkout: README.md"
    co = checkout_path(r, f"{pool_name(cfg('true'))}-1", "unit")  # the pool's first member
    assert (co / "README.md").read_text() == "# test repo\n"  # restored, flag cleared
    assert verify_commit(r, "HEAD", cfg("true"), key="k").verdict == Verdict.PASS


def test_a_lane_that_writes_info_exclude_changed_its_checkout(r: Repository) -> None:
    lane = "mkdir -p .git/info && echo new.txt >> .git/info/exclude && echo x > new.txt"
    rec = verify_commit(r, "HEAD", cfg(lane), key="k")
    assert rec.verdict == Verdict.FAIL
    assert rec.lanes[0].reason == "changed the checkout: new.txt"  # hidden from nothing


def test_scrub_keeps_exactly_the_paths_given(tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    subprocess.run(["git", "init", "-q", str(wt)], check=True)
    (wt / ".gitignore").write_text("*.pyc\nbuild/\n")
    subprocess.run(["git", "-C", str(wt), "add", "."], check=True)
    subprocess.run(["git", "-C", str(wt), "commit", "-qm", "i"], check=True)
    for name in ("we[ir]d.pyc", "we d.pyc", "other.pyc", "build/a.o", "keep/x", "loose.txt"):
        (wt / name).parent.mkdir(parents=True, exist_ok=True)
        (wt / name).write_text("x")
    listed = hermetic.untracked(wt, wt / ".git")
    assert listed == ["build/", "keep/", "loose.txt", "other.pyc", "we d.pyc", "we[ir]d.pyc"]
    hermetic.scrub(wt, wt / ".git", keep=["we[ir]d.pyc", "keep/"])
    assert hermetic.untracked(wt, wt / ".git") == ["keep/", "we[ir]d.pyc"]
