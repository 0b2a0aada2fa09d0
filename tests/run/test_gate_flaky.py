"""The gate and a flaky test, through the real CLI on a real pytest suite: a test
that fails half the time blames no innocent task, the real culprit is named with
its test, and a blame a flaky test laid is given back once forge learns it."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan
from helpers.suites import ADD, FLAKY, PYTEST, pytest_suite

BREAK_ADD = "sed -i 's/a + b/a - b/' lib.py"


def task(tid: str, run: str | None = None, files: str | None = None) -> str:
    run = run or f"echo {tid} > {tid}.txt"
    return f"[[task]]\nid = \"{tid}\"\nrun = '''{run}'''\nfiles = [\"{files or tid + '.txt'}\"]\n"


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


def test_a_blame_a_flaky_test_laid_is_given_back_and_the_task_lands(
    repo: Path, tmp_path: Path
) -> None:
    # The flaky test fails twice in a row on the batch (confirmed, as any failure
    # of a test with no flaky history), then passes: the bisection blames the last task.
    pytest_suite(repo, tmp_path / "n", "FFP")
    body = task("a") + task("b") + task("c")
    plan = write_plan(
        tmp_path, f"verify = '''{PYTEST}'''\nverify_reruns = 1\ngate = \"end\"\n" + body
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "FAILED"}
    blamed = state(repo)["tasks"]["c"]
    assert FLAKY in blamed["reason"]
    # forge learns it is flaky: the tree it failed on passes it.
    again = run_forge(repo, "verify", blamed["verified_by"]["commit"])
    assert again.returncode == 0, again.stdout + again.stderr
    shown = run_forge(repo, "status", "c", "--json")
    assert json.loads(shown.stdout)["status"] == "FAILED"  # until the next run
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "MERGED"}
    landed = state(repo)["tasks"]["c"]
    assert len(landed["attempts"]) == 1  # no new attempt: the same change, verified again
    assert any(w.startswith(f"blame cleared: {FLAKY} proved flaky") for w in landed["warnings"])


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
    assert f"FLAKY (flaky: {FLAKY})" in cp.stdout
    covered = json.loads(run_forge(repo, "status", "a", "--json").stdout)["verified_by"]
    assert covered["verdict"] == "FLAKY" and covered["flaky"] == [FLAKY]
    assert f"FLAKY (flaky: {FLAKY})" in run_forge(repo, "status").stdout
    # The next task's batch fails it again: quarantined now, it blames nobody.
    plan.write_text(plan.read_text() + task("c"))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"PASS (quarantined: {FLAKY} failed)" in cp.stdout
    covered = json.loads(run_forge(repo, "status", "c", "--json").stdout)["verified_by"]
    assert covered["verdict"] == "PASS" and covered["quarantined"] == [FLAKY]


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
    assert len(b["attempts"]) == 1
    assert any(w.startswith(f"blame cleared: {FLAKY} proved flaky") for w in b["warnings"]), (
        cp.stderr
    )
    assert ADD in state(repo)["tasks"]["culprit"]["reason"]
