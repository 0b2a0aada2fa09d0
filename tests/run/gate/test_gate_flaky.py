"""The gate and a flaky test, through the real CLI on a real pytest suite: a test
that fails half the time blames no innocent task, the real culprit is named with
its test, and a blame a flaky test laid is given back once forge learns it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan
from helpers.suites import ADD, FLAKY, PYTEST, pytest_suite

BREAK_ADD = "sed -i 's/a + b/a - b/' lib.py"


def task(tid: str, run: str | None = None, files: str | None = None) -> str:
    run = run or f"echo {tid} > {tid}.txt"
    return f"[[task]]\nid = \"{tid}\"\nrun = '''{run}'''\nfiles = [\"{files or tid + '.txt'}\"]\n"


@pytest.mark.slow
def test_a_half_flaky_test_blames_no_innocent_and_the_culprit_is_named_with_its_test(
    repo: Path, tmp_path: Path
) -> None:
    pytest_suite(repo, tmp_path / "n", "FP" * 200)
    innocents = [f"t{i:02d}" for i in range(11)]
    body = "".join(task(t) for t in innocents[:5]) + task("culprit", BREAK_ADD, "lib.py")
    body += "".join(task(t) for t in innocents[5:])
    plan = write_plan(
        tmp_path, f"verify = '''{PYTEST}'''\nverify_reruns = 2\nmax_parallel = 2\n" + body
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {**dict.fromkeys(innocents, "MERGED"), "culprit": "FAILED"}
    culprit = state(repo)["tasks"]["culprit"]
    assert ADD in culprit["reason"]
    assert [f["test"] for f in culprit["attempts"][-1]["failures"]] == [ADD]
    listed = json.loads(run_forge(repo, "tests", "--json").stdout)
    flaky = {r["test"]: r for r in listed}[FLAKY]
    assert flaky["flaky"] and flaky["quarantined"] and 0 < flaky["flake_rate"] <= 1


def test_a_flaky_test_failing_twice_on_the_batch_blames_nobody(repo: Path, tmp_path: Path) -> None:
    # The flaky test fails on the batch and again when run on the head: the head's
    # own failure, not the batch's, so every task lands with no new attempt.
    pytest_suite(repo, tmp_path / "n", "FFP")
    body = task("a") + task("b") + task("c")
    plan = write_plan(
        tmp_path, f"verify = '''{PYTEST}'''\nverify_reruns = 1\ngate = \"end\"\n" + body
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "MERGED"}
    assert all(len(t["attempts"]) == 1 for t in state(repo)["tasks"].values())
    assert f"already failing on the head: {FLAKY}" in cp.stdout


def test_a_flaky_or_quarantined_verdict_names_its_tests_in_status_and_summary(
    repo: Path, tmp_path: Path
) -> None:
    pytest_suite(repo, tmp_path / "n", "FPF")
    plan = write_plan(
        tmp_path,
        f"verify = '''{PYTEST}'''\nverify_reruns = 1\ngate = \"end\"\n" + task("a") + task("b"),
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    # Failed, then passed on one tree: flaky on evidence, quarantined, named.
    said = f"PASS (quarantined: {FLAKY} failed)"
    assert said in cp.stdout and said in run_forge(repo, "status").stdout
    covered = json.loads(run_forge(repo, "status", "b", "--json").stdout)["verified_by"]
    assert covered["verdict"] in ("PASS", "FLAKY")
    assert FLAKY in covered.get("quarantined", []) + covered.get("flaky", [])
    listed = {r["test"]: r for r in json.loads(run_forge(repo, "tests", "--json").stdout)}
    assert listed[FLAKY]["flaky"] and listed[FLAKY]["quarantined"]


def test_a_lane_that_ran_no_test_lands_nothing_blames_nobody_and_pauses(
    repo: Path, tmp_path: Path
) -> None:
    pytest_suite(repo, tmp_path / "n")
    plan = write_plan(
        tmp_path, f"verify = '''{PYTEST} -k no_such_test'''\n" + task("a") + task("b")
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 8, cp.stdout + cp.stderr
    assert set(statuses(repo).values()) == {"QUEUED"}
    paused = state(repo)["paused"]
    assert "lane verify ran no tests" in paused and "allow_empty = true" in paused
    assert "ran no tests" in cp.stdout + cp.stderr


@pytest.mark.slow
def test_a_quarantined_test_is_released_after_passing_on_landed_trees(
    repo: Path, tmp_path: Path
) -> None:
    pytest_suite(repo, tmp_path / "n", "FPP")
    (repo / "forge.toml").write_text(
        f"[verify]\ncommand = '''{PYTEST}'''\nreruns = 1\n\n[tests]\nrelease_after = 1\n"
    )
    git(repo, "add", "forge.toml")
    git(repo, "commit", "-q", "-m", "forge.toml")
    assert run_forge(repo, "verify").returncode == 0  # failed, then passed: flaky
    row = {r["test"]: r for r in json.loads(run_forge(repo, "tests", "--json").stdout)}[FLAKY]
    assert row["flaky"] and row["quarantined"]
    cp = plan_and_run(repo, write_plan(tmp_path, task("a")))  # it passes on the landed tree
    assert cp.returncode == 0, cp.stdout + cp.stderr
    row = {r["test"]: r for r in json.loads(run_forge(repo, "tests", "--json").stdout)}[FLAKY]
    assert row["flaky"] and not row["quarantined"]
    assert row["why"] == "released after 1 pass"
    mine = {
        r["test"]: r for r in json.loads(run_forge(repo, "tests", "--plan", "p", "--json").stdout)
    }
    assert mine[FLAKY]["runs"] == 1 and row["runs"] == 3  # the plan's own runs, and all
    assert run_forge(repo, "tests", "--plan", "nope").returncode == 2


@pytest.mark.slow
def test_a_blame_given_back_in_the_same_run_is_judged_again_not_remembered(
    repo: Path, tmp_path: Path
) -> None:
    # Runs: the batch fails test_add twice (the flaky test passing); the bisection's
    # [a, b] fails the flaky test twice, [a] passes: b is blamed. The culprit alone
    # then fails test_add with the flaky test failing, passing, failing: flaky now,
    # so b's blame is given back, and b's tree, which failed in this run, is judged
    # again (and passes) rather than answered from this run's memory of the FAIL.
    pytest_suite(repo, tmp_path / "n", "PPFFPFPFP")
    body = task("a") + task("b") + task("culprit", BREAK_ADD, "lib.py")
    head = f"verify = '''{PYTEST}'''\ngate = \"end\"\nmax_parallel = 1\nverify_parallel = 1\n"
    plan = write_plan(tmp_path, head + body)
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "culprit": "FAILED"}
    b = state(repo)["tasks"]["b"]
    assert len(b["attempts"]) == 1  # never blamed, or its blame given back: no new attempt
    assert ADD in state(repo)["tasks"]["culprit"]["reason"]
