"""The gate and a flaky test, through the real CLI on a real pytest suite: a test
that fails half the time blames no innocent task, the real culprit is named with
its test, and a blame a flaky test laid is given back once forge learns it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers.gitkit import commit_all, git, run_forge
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
    # On every tree the test fails at its first run there, passes at the next, and
    # so on: half its runs fail, whatever order the gate runs the trees in.
    pytest_suite(repo, tmp_path / "n", "FP" * 200, per_tree=True)
    innocents = [f"t{i:02d}" for i in range(11)]
    body = "".join(task(t) for t in innocents[:5]) + task("culprit", BREAK_ADD, "lib.py")
    body += "".join(task(t) for t in innocents[5:])
    plan = write_plan(
        tmp_path, f"verify = '''{PYTEST}'''\nverify_reruns = 2\nmax_parallel = 2\n" + body
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {**dict.fromkeys(innocents, "MERGED"), "culprit": "FAILED"}
    for tid in innocents:  # never blamed: one attempt, no blame given back
        ts = state(repo)["tasks"][tid]
        assert [a["status"] for a in ts["attempts"]] == ["MERGED"], (tid, cp.stderr)
        assert not any(w.startswith("blame cleared") for w in ts["warnings"]), (tid, cp.stderr)
    culprit = state(repo)["tasks"]["culprit"]
    assert ADD in culprit["reason"]
    assert [f["test"] for f in culprit["attempts"][-1]["failures"]] == [ADD]
    listed = json.loads(run_forge(repo, "tests", "--json").stdout)
    flaky = {r["test"]: r for r in listed}[FLAKY]
    assert flaky["flaky"] and flaky["quarantined"] and 0 < flaky["flake_rate"] <= 1


def test_a_test_flaky_on_the_head_is_a_flake_not_the_heads_own_failure(
    repo: Path, tmp_path: Path
) -> None:
    # The flaky test fails on the batch and when run on the head, then passes when
    # run on the head once more: flaky on evidence, so the batch lands as FLAKY
    # naming it, never as a failure the head has, and nobody is blamed.
    pytest_suite(repo, tmp_path / "n", "FFP")
    body = task("a") + task("b") + task("c")
    plan = write_plan(
        tmp_path, f"verify = '''{PYTEST}'''\nverify_reruns = 1\ngate = \"end\"\n" + body
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "MERGED"}
    assert all(len(t["attempts"]) == 1 for t in state(repo)["tasks"].values())
    assert "already failing on the head" not in cp.stdout
    # What landed passed a whole run that exited 0, the test (quarantined now: it
    # flipped on the head, a landed tree) left out of it by its exact id.
    said = f"FLAKY (1 deselected: {FLAKY} (quarantined, flaky); flaky: {FLAKY})"
    assert said in cp.stdout and said in run_forge(repo, "status").stdout
    shown = json.loads(run_forge(repo, "status", "--json").stdout)
    assert not (shown["gate"]["pre_existing"] or {}).get("tests")
    covered = json.loads(run_forge(repo, "status", "c", "--json").stdout)["verified_by"]
    assert covered["verdict"] == "FLAKY" and covered["flaky"] == [FLAKY]
    listed = {r["test"]: r for r in json.loads(run_forge(repo, "tests", "--json").stdout)}
    assert listed[FLAKY]["flaky"] and listed[FLAKY]["quarantined"]
    # The report's "Tests" section names it, with its runs and its rate.
    out = tmp_path / "report.html"
    assert run_forge(repo, "report", "-o", str(out)).returncode == 0
    page = out.read_text()
    tests = page[page.index("<h2>Tests</h2>") :]
    assert f"<code>{FLAKY}</code>" in tests and "of its runs fail" in tests


def test_a_flaky_or_quarantined_verdict_names_its_tests_in_status_and_summary(
    repo: Path, tmp_path: Path
) -> None:
    pytest_suite(repo, tmp_path / "n", "FPF")
    (repo / "forge.toml").write_text(f"[verify]\ncommand = '''{PYTEST}'''\nreruns = 1\n")
    git(repo, "add", "forge.toml")
    git(repo, "commit", "-q", "-m", "forge.toml")
    # Failed, then passed on one tree: FLAKY, named; flaky on evidence from now on.
    cp = run_forge(repo, "verify")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"FLAKY (flaky: {FLAKY})" in cp.stdout
    # It fails on the batch: quarantined, it blames nobody, and every view names it.
    cp = plan_and_run(repo, write_plan(tmp_path, task("a") + task("b")))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    said = f"PASS (1 deselected: {FLAKY} (quarantined, flaky))"
    assert said in cp.stdout and said in run_forge(repo, "status").stdout
    for tid in ("a", "b"):
        covered = json.loads(run_forge(repo, "status", tid, "--json").stdout)["verified_by"]
        assert covered["verdict"] == "PASS" and covered["summary"] == said
        left = {"lane": "verify", "test": FLAKY, "why": "quarantined, flaky"}
        assert covered["deselected"] == [left]
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


# The flaky test of the tests below is driven by files, not by runs' luck or order:
# on a tree that holds b.txt it fails while the marker exists; on a tree that holds
# c.txt (and no b.txt) it fails at its first run there and passes after.
MARKED = """import pathlib

from lib import add

ROOT = pathlib.Path(__file__).parent.parent
MARKER = pathlib.Path({marker!r})
COUNTER = pathlib.Path({counter!r})


def test_add():
    assert add(2, 2) == 4, "add is broken"


def test_clock_skew():
    if (ROOT / "b.txt").exists():
        assert not MARKER.exists(), "clock skew while the marker is there"
    elif (ROOT / "c.txt").exists():
        n = int(COUNTER.read_text()) if COUNTER.exists() else 0
        COUNTER.write_text(str(n + 1))
        assert n > 0, "clock skew at the first run"
"""
CULPRIT = (
    '[[task]]\nid = "culprit"\n'
    f'run = "{BREAK_ADD} && echo c > c.txt"\nfiles = ["lib.py", "c.txt"]\n'
)
GATED = f"verify = '''{PYTEST}'''\nverify_reruns = 1\ngate = \"end\"\n"


def marked_suite(repo: Path, tmp_path: Path) -> Path:
    """The suite above, committed; the marker (made)."""
    marker = tmp_path / "marker"
    marker.write_text("")
    pytest_suite(repo, tmp_path / "unused")
    suite = MARKED.format(marker=str(marker), counter=str(tmp_path / "c-runs"))
    (repo / "tests" / "test_lib.py").write_text(suite)
    commit_all(repo, "a suite with a test driven by a marker")
    return marker


def attempt_row(repo: Path, task: str) -> tuple[str, int, int]:
    """The history's record of the task's last attempt: (outcome, culprit, landed)."""
    con = sqlite3.connect(repo / ".git" / "forge" / "private" / "history.sqlite")
    try:
        row = con.execute(
            "SELECT outcome, culprit, landed FROM attempts WHERE task = ? ORDER BY number DESC",
            (task,),
        ).fetchone()
    finally:
        con.close()
    return (str(row[0]), int(row[1]), int(row[2]))


def test_a_blame_a_flaky_test_laid_is_given_back_and_the_next_run_lands_it(
    repo: Path, tmp_path: Path
) -> None:
    marker = marked_suite(repo, tmp_path)
    cp = plan_and_run(repo, write_plan(tmp_path, GATED + task("a") + task("b")))
    # The test fails on b's tree, again when run there once more, and passes
    # without b: b is blamed.
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "FAILED"}
    blamed = state(repo)["tasks"]["b"]
    assert FLAKY in blamed["reason"]
    assert attempt_row(repo, "b") == ("FAILED", 1, 0)
    # A flip on b's tree (a candidate's) would be evidence for b's verdict alone; a
    # person says it is flaky.
    marker.unlink()
    said = run_forge(repo, "tests", "--quarantine", FLAKY)
    assert said.returncode == 0, said.stderr
    row = {r["test"]: r for r in json.loads(run_forge(repo, "tests", "--json").stdout)}[FLAKY]
    assert row["quarantined"]
    # The next run gives the blame back: the same change, verified again, lands.
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    landed = state(repo)["tasks"]["b"]
    assert [a["status"] for a in landed["attempts"]] == ["MERGED"]  # no new attempt
    cleared = f"blame cleared: {FLAKY} proved flaky"
    assert any(w.startswith(cleared) for w in landed["warnings"]), landed["warnings"]
    table = run_forge(repo, "status").stdout
    assert cleared in table and "goes to the gate again" not in table, table
    # Its last log is its own, not the verification's that blamed it.
    told = run_forge(repo, "status", "p", "b").stdout
    assert f"last log: {landed['attempts'][-1]['log']}" in told
    assert landed["attempts"][-1]["log"].endswith("/b/attempt-1/agent.log"), told
    # The report's gate table says that the step which blamed b was cleared.
    page = tmp_path / "r.html"
    assert run_forge(repo, "report", "-o", str(page)).returncode == 0
    html = page.read_text()
    assert "<td>FAIL (cleared: b)</td>" in html
    # The Tests section names the task the flaky test blamed, cleared since.
    row = html[html.index(f"<code>{FLAKY}</code>") :].split("</tr>")[0]
    assert row.endswith("<td>b (cleared)</td>"), row
    known = {r["test"]: r for r in json.loads(run_forge(repo, "tests", "--json").stdout)}
    assert known[FLAKY]["blamed"] == ["p/b (cleared)"] and known[FLAKY]["why"] == "a person's word"
    shown = json.loads(run_forge(repo, "status", "b", "--json").stdout)
    assert any(w.startswith(cleared) for w in shown["warnings"])
    # The history no longer counts it a culprit: it landed, at its first attempt.
    assert attempt_row(repo, "b") == ("MERGED", 0, 1)


def test_a_flip_on_a_candidates_tree_stays_with_that_change(repo: Path, tmp_path: Path) -> None:
    # The batch [a, b, culprit] fails test_add and the flaky test; the bisection
    # finds [a] passing and [a, b] failing the flaky test (it holds b.txt): b is
    # blamed, its test failing again on its tree. The culprit, batched next on its
    # own, fails test_add and the flaky test, which passes when run alone there: what
    # the culprit's tree says (a candidate's) is evidence for the culprit's verdict
    # alone. Nothing is quarantined for the repository, so b's blame stands.
    marked_suite(repo, tmp_path)
    plan = GATED + "max_parallel = 1\nverify_parallel = 1\n" + task("a") + task("b") + CULPRIT
    cp = plan_and_run(repo, write_plan(tmp_path, plan))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "FAILED", "culprit": "FAILED"}
    assert attempt_row(repo, "b") == ("FAILED", 1, 0)
    culprit = state(repo)["tasks"]["culprit"]
    assert ADD in culprit["reason"] and FLAKY not in culprit["reason"], culprit["reason"]
    assert [f["test"] for f in culprit["attempts"][-1]["failures"]] == [ADD]
    listed = {r["test"]: r for r in json.loads(run_forge(repo, "tests", "--json").stdout)}
    assert not listed[FLAKY]["quarantined"]
    # (it failed a whole run and passed alone there: runs of two kinds, no flakiness)
    assert listed[FLAKY]["flaky_on"] is None, listed[FLAKY]
