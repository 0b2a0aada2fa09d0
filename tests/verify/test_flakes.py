"""When the gate reruns a failing lane (forge/verify/flakes.py): a failure is
confirmed once, a failure already confirmed in the batch and a failing test the
integration head does not have are not rerun, and anything else gets its reruns."""

from __future__ import annotations

from pathlib import Path

from helpers.gitkit import commit_all, git

from forge.git.repo import discover
from forge.verify.failures import Failure
from forge.verify.flakes import Confirm, Fixed, exists_at, failing_tests
from forge.verify.records import LaneRun


def run(*tests: str) -> LaneRun:
    failures = tuple(Failure("unit", t, "boom") for t in tests)
    return LaneRun("initial", 1, 0.1, (), "x.log", failures=failures)


def test_a_fixed_rule_reruns_up_to_its_count() -> None:
    rule = Fixed(2)
    assert rule.again("unit", [run()]) and rule.again("unit", [run(), run()])
    assert not rule.again("unit", [run(), run(), run()])


def test_a_rerun_that_fails_the_same_tests_confirms_the_failure() -> None:
    rule = Confirm(2, failing_tests)
    assert rule.again("unit", [run("t::a")])
    assert not rule.again("unit", [run("t::a"), run("t::a")])
    # the same failure later in the batch (a bisection step) is not rerun at all
    assert not rule.again("unit", [run("t::a")])
    # another failure could still be a flake
    assert rule.again("unit", [run("t::b")])
    assert rule.again("other", [run("t::a")])


def test_a_failure_that_changes_between_runs_gets_all_its_reruns() -> None:
    rule = Confirm(2, failing_tests)
    assert rule.again("unit", [run("t::a"), run("t::b")])
    assert not rule.again("unit", [run("t::a"), run("t::b"), run("t::c")])


def test_a_log_naming_no_test_is_judged_by_its_lane() -> None:
    rule = Confirm(2, failing_tests)
    assert rule.again("unit", [run()])
    assert not rule.again("unit", [run(), run()])
    assert not rule.again("unit", [run()])


def test_a_new_test_is_not_rerun() -> None:
    rule = Confirm(2, failing_tests, is_new=lambda test: test == "t::new")
    assert not rule.again("unit", [run("t::old", "t::new")])
    assert rule.again("unit", [run("t::old")])


def test_a_test_is_looked_up_in_the_commit(repo: Path) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_old():\n    pass\n")
    head = commit_all(repo, "a test")
    r = discover(repo)
    assert exists_at(r, head, "tests/test_a.py::test_old")
    assert exists_at(r, head, "tests/test_a.py::test_old[1-2]")
    assert not exists_at(r, head, "tests/test_a.py::test_new")
    assert not exists_at(r, head, "tests/test_b.py::test_old")
    assert exists_at(r, head, "test_old (test_a.Suite.test_old)")
    assert not exists_at(r, head, "TestNew")
    assert git(repo, "status", "--porcelain") == ""
