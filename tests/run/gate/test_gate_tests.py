"""The gate judges a failure by its failing tests, in a real pytest suite: a test the
integration head fails already blames nobody (`gate_on = "regressions"`), and a
confirming rerun and the bisection run only the failing tests (counted here, test
by test, by a conftest that appends each executed test's id to a file)."""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, commit_all, run_forge
from helpers.runkit import plan_and_run, spawn_forge, state, statuses, wait_for, write_plan

PY = shlex.quote(sys.executable)
SUITE = 10  # tests that always pass; with the guards, the whole suite

SUITE_FILE = """\
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parent.parent


@pytest.mark.parametrize("i", range({suite}))
def test_fine(i):
    assert i >= 0


def test_guard_one():
    assert not (ROOT / "culprit.txt").exists()


def test_guard_two():
    assert not (ROOT / "culprit.txt").exists()
"""

RED = """

def test_red():
    assert (ROOT / "fix.txt").exists()
"""

CONFTEST = """\
def pytest_runtest_logreport(report):
    if report.when == "call":
        with open({count!r}, "a") as f:
            f.write(report.nodeid + "\\n")
"""


def suite(repo: Path, count: Path, *, red: bool = False) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_suite.py").write_text(
        SUITE_FILE.format(suite=SUITE) + (RED if red else "")
    )
    (repo / "conftest.py").write_text(CONFTEST.format(count=str(count)))
    (repo / ".gitignore").write_text("__pycache__/\n")
    commit_all(repo, "a suite")


def body(ids: list[str], *, culprit: str | None = None, extra: str = "") -> str:
    # (no plugins: a pytest run starts in a second, not several)
    cmd = f"env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -q -p no:cacheprovider"
    out = f"verify = '{cmd}'\nverify_reruns = 1\n{extra}"
    for tid in ids:
        name = "culprit.txt" if tid == culprit else f"{tid}.txt"
        if tid == "fixer":
            name = "fix.txt"
        out += f'[[task]]\nid = "{tid}"\nrun = "echo {tid} > {name}"\nfiles = ["{name}"]\n'
    return out


def executions(count: Path) -> list[str]:
    return count.read_text().splitlines() if count.exists() else []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bisection_runs_only_the_failing_tests(repo: Path, tmp_path: Path) -> None:
    count = tmp_path / "executed"
    suite(repo, count)
    n, k = 8, 2
    ids = [f"t{i}" for i in range(n)]
    cp = plan_and_run(repo, write_plan(tmp_path, body(ids, culprit="t5", extra='gate = "end"\n')))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {t: "FAILED" if t == "t5" else "MERGED" for t in ids}
    reason = state(repo)["tasks"]["t5"]["reason"]
    assert "tests/test_suite.py::test_guard_" in reason, reason
    whole = SUITE + k
    # Two whole-suite runs (the tip, the tree that lands), the failing tests' reruns,
    # and the whole-suite run of the tasks rebuilt after the culprit.
    # (k more than the first bound: the culprit's failing tests once more on
    # its own tree before it is blamed, which tells a flake from a regression)
    bound = 2 * whole + k * (3 + math.ceil(math.log2(n))) + whole
    ran = executions(count)
    assert len(ran) <= bound, (len(ran), bound)
    # Only three runs ran the whole suite.
    assert ran.count("tests/test_suite.py::test_fine[0]") == 3
    head = json.loads(run_forge(repo, "status", "--json").stdout)["verification"]
    assert head["verdict"] == "PASS"


@pytest.mark.timeout(600)
def test_the_whole_run_of_the_prefix_that_lands_is_a_prefix_step(
    repo: Path, tmp_path: Path
) -> None:
    count = tmp_path / "executed"
    suite(repo, count)
    ids = ["a", "bad", "b"]  # queued in this order: one at a time
    extra = 'gate = "end"\nmax_parallel = 1\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body(ids, culprit="bad", extra=extra)))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    steps = state(repo)["gate_steps"]
    prefix = [s for s in steps if s["name"] == "prefix"]
    assert [s["tasks"] for s in prefix] == [["a"]], [
        (s["name"], s["tasks"], s["verdict"]) for s in steps
    ]
    assert prefix[0]["verdict"] == "PASS"
    page = tmp_path / "r.html"
    assert run_forge(repo, "report", "-o", str(page)).returncode == 0
    assert "<td>prefix</td>" in page.read_text()


def test_the_gates_steps_have_colours_apart() -> None:
    from forge.commands.report.svg import phase_color

    steps = ("batch", "head", "bisection", "prefix", "speculation")
    assert len({phase_color(step) for step in steps}) == len(steps)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_red_base_blames_nobody_and_a_culprit_is_still_named(repo: Path, tmp_path: Path) -> None:
    count = tmp_path / "executed"
    suite(repo, count, red=True)
    ids = ["a", "b", "c", "bad", "d"]
    cp = plan_and_run(repo, write_plan(tmp_path, body(ids, culprit="bad", extra='gate = "end"\n')))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {t: "FAILED" if t == "bad" else "MERGED" for t in ids}
    reason = state(repo)["tasks"]["bad"]["reason"]
    assert "test_guard_" in reason and "test_red" not in reason, reason
    said = "already failing on the head: tests/test_suite.py::test_red"
    assert said in cp.stdout, cp.stdout
    assert "fails verification on its own" not in cp.stdout
    text = run_forge(repo, "status").stdout
    assert said in text, text
    data = json.loads(run_forge(repo, "status", "--json").stdout)
    tests = data["gate"]["pre_existing"]["tests"]
    assert tests == [{"lane": "verify", "test": "tests/test_suite.py::test_red"}]
    assert all("test_red" not in (t["reason"] or "") for t in data["tasks"])
    out = tmp_path / "report.html"
    assert run_forge(repo, "report", "-o", str(out)).returncode == 0
    page = out.read_text()
    row = page[page.index("<code>tests/test_suite.py::test_red</code>") :].split("</tr>")[0]
    assert "<h2>Tests</h2>" in page and row.endswith("<td>yes</td><td>-</td>"), row
    guard = page[page.index("<code>tests/test_suite.py::test_guard_one</code>") :]
    assert guard.split("</tr>")[0].endswith("<td>bad</td>")  # the task it blamed


@pytest.mark.timeout(600)
def test_a_red_base_lands_every_innocent_task_and_credits_a_fix(repo: Path, tmp_path: Path) -> None:
    count = tmp_path / "executed"
    suite(repo, count, red=True)
    cp = plan_and_run(repo, write_plan(tmp_path, body(["a", "b"], extra='gate = "end"\n')))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert "already failing on the head: tests/test_suite.py::test_red" in cp.stdout
    assert "breaks verification" not in cp.stdout, cp.stdout
    # A later task fixes it: credited.
    plan = write_plan(tmp_path, body(["a", "b", "fixer"], extra='gate = "end"\n'))
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo)["fixer"] == "MERGED"
    assert "fixed by fixer: tests/test_suite.py::test_red" in cp.stdout, cp.stdout
    data = json.loads(run_forge(repo, "status", "--json").stdout)
    assert data["gate"]["pre_existing"]["tests"] == []


@pytest.mark.timeout(600)
def test_gate_on_green_keeps_a_red_base_stopping_the_gate(repo: Path, tmp_path: Path) -> None:
    count = tmp_path / "executed"
    suite(repo, count, red=True)
    extra = 'gate = "end"\ngate_on = "green"\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body(["a", "b"], extra=extra)))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "QUEUED", "b": "QUEUED"}


@pytest.mark.timeout(600)
def test_status_says_what_the_gate_runs_now(repo: Path, tmp_path: Path) -> None:
    count, hold = tmp_path / "executed", tmp_path / "hold"
    suite(repo, count)
    (repo / "tests" / "test_hold.py").write_text(
        f"import pathlib, time\n\n\ndef test_hold():\n"
        f"    while pathlib.Path({str(hold)!r}).exists():\n        time.sleep(0.05)\n"  # sleep-ok: the poll of a test that waits
    )
    commit_all(repo, "a test that waits")
    hold.write_text("")
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body(["a"])))).returncode == 0
    proc = spawn_forge(repo, "run")
    try:

        def doing() -> str:
            data = json.loads(run_forge(repo, "status", "--json").stdout)
            return str(data["gate"]["doing"] or "")

        # What runs (the whole suite), what its lane is at, and for how long.
        wait_for(lambda: "(lane verify run 1 of at most 2)" in doing(), timeout=300, what="run")
        assert "running the whole suite on " in doing()
        shown = run_forge(repo, "status").stdout
        assert (
            "running the whole suite on " in shown
            and "(lane verify run 1 of at most 2) for " in shown
        )
    finally:
        hold.unlink()
        proc.wait(timeout=300)
    assert statuses(repo) == {"a": "MERGED"}


def test_a_lane_that_is_no_test_suite_is_not_called_the_whole_suite(
    repo: Path, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.write_text("")
    lane = f"while [ -e {hold} ]; do sleep 0.05; done"  # sleep-ok: the lane waits, not the test
    plan = write_plan(
        tmp_path,
        f"verify = '{lane}'\n" + '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n',
    )
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    proc = spawn_forge(repo, "run")
    try:

        def doing() -> str:
            data = json.loads(run_forge(repo, "status", "--json").stdout)
            return str(data["gate"]["doing"] or "")

        wait_for(lambda: "running the verification on " in doing(), timeout=120, what="lane")
        assert "whole suite" not in doing()
    finally:
        hold.unlink()
        proc.wait(timeout=120)
    assert statuses(repo) == {"a": "MERGED"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_best_of_candidate_is_not_ruled_out_by_the_heads_own_failure(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite(repo, tmp_path / "executed", red=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("FORGE_FAKE_DIR", str(shared))
    agent = json.dumps([sys.executable, str(FAKES / "agent_candidate.py"), "{model}", "a.txt"])
    cmd = f"env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -q -p no:cacheprovider"
    plan = (
        f"verify = '{cmd}'\nverify_reruns = 0\nselect = \"best\"\n"
        'candidates = ["fake:small", "fake:big"]\n'
        f'[agents.fake]\ncommand = {agent}\nmodels = ["small", "big"]\n'
        '[[task]]\nid = "a"\nprompt = "write a.txt"\nfiles = ["a.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, plan))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}
    assert "already failing on the head: tests/test_suite.py::test_red" in cp.stdout
    assert "breaks verification" not in cp.stdout, cp.stdout
