"""`forge combine NEW A B`: one verified integration branch from several plans."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, write_plan
from helpers.snapshot import snapshot


def _plan(tmp: Path, name: str, path: str, text: str) -> Path:
    body = f'[[task]]\nid = "t"\nfiles = ["{path}"]\nrun = "echo {text} > {path}"\n'
    return write_plan(tmp, f'verify = "test -f {path}"\n' + body, name=name)


def _run_both(repo: Path, tmp: Path, a: tuple[str, str], b: tuple[str, str]) -> None:
    for name, (path, text) in (("a", a), ("b", b)):
        cp = plan_and_run(repo, _plan(tmp, name, path, text), name)
        assert cp.returncode == 0, cp.stdout + cp.stderr


def test_combine_two_verified_plans_and_accept_the_whole(repo: Path, tmp_path: Path) -> None:
    _run_both(repo, tmp_path, ("a.txt", "A"), ("b.txt", "B"))
    check = "test -f a.txt && test -f b.txt"

    before = snapshot(repo)
    cp = run_forge(repo, "combine", "both", "a", "b", "--verify", check, "--dry-run")
    assert cp.returncode == 0, cp.stderr
    assert "the plans merge cleanly" in cp.stdout and "dry run: nothing was written" in cp.stdout
    assert snapshot(repo) == before

    cp = run_forge(repo, "combine", "both", "a", "b", "--verify", check)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "verification PASS" in cp.stdout
    assert "`forge accept both` lands the whole" in cp.stdout
    head = git(repo, "rev-parse", "forge/both-integration")
    # both plans' work, merged onto their common base without a checkout
    for plan in ("a", "b"):
        assert git(repo, "merge-base", "--is-ancestor", f"forge/{plan}-integration", head) == ""
    assert git(repo, "status", "--porcelain") == ""
    subjects = git(repo, "log", "--first-parent", "--format=%s", head).splitlines()
    assert subjects[:2] == ["forge: combine plan b into both", "forge: combine plan a into both"]

    cp = run_forge(repo, "status", "both")
    assert cp.returncode == 0, cp.stderr
    assert "combined from: a (" in cp.stdout and "verification: PASS" in cp.stdout
    data = json.loads(run_forge(repo, "status", "both", "--json").stdout)
    assert data["integration_head"] == head and set(data["combined"]) == {"a", "b"}

    cp = run_forge(repo, "accept", "both")
    assert cp.returncode == 0, cp.stderr
    assert "fast-forwarded main to forge/both-integration" in cp.stdout
    assert (repo / "a.txt").read_text() == "A\n" and (repo / "b.txt").read_text() == "B\n"


def test_conflicting_plans_are_named_and_nothing_is_written(repo: Path, tmp_path: Path) -> None:
    _run_both(repo, tmp_path, ("shared.txt", "A"), ("shared.txt", "B"))
    before = snapshot(repo)
    for extra in ((), ("--dry-run",)):
        cp = run_forge(repo, "combine", "both", "a", "b", *extra)
        assert cp.returncode == 5, cp.stdout + cp.stderr
        assert "Traceback" not in cp.stderr
        assert cp.stderr.startswith(
            "forge: plan 'b' conflicts with plan 'a' on shared.txt; nothing was written"
        ), cp.stderr
        assert snapshot(repo) == before


def test_a_combination_that_fails_verification_does_not_land(repo: Path, tmp_path: Path) -> None:
    _run_both(repo, tmp_path, ("a.txt", "A"), ("b.txt", "B"))
    before = snapshot(repo)[1]
    cp = run_forge(repo, "combine", "both", "a", "b", "--verify", "test -f nothing.txt")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "forge/both-integration was not moved" in cp.stderr
    assert snapshot(repo)[1] == before
    assert not (repo / ".git/forge/plans/both/plan.json").exists()


def test_bad_combinations_are_refused(repo: Path, tmp_path: Path) -> None:
    _run_both(repo, tmp_path, ("a.txt", "A"), ("b.txt", "B"))
    cases = {
        ("both", "a"): "name at least two plans",
        ("both", "a", "a"): "a plan is named twice",
        ("a", "a", "b"): "cannot be combined into itself",
        ("b", "a", "ghost"): "no plan named 'ghost'",
        ("x-integration", "a", "b"): "plan name `x-integration` is not valid",
    }
    before = snapshot(repo)
    for args, message in cases.items():
        cp = run_forge(repo, "combine", *args)
        assert cp.returncode == 2, (args, cp.stderr)
        assert message in cp.stderr, (args, cp.stderr)
    assert snapshot(repo) == before
