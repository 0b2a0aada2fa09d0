"""What lands passed a whole run of every lane that exited 0, with the forgiven
tests left out by their exact ids and named; no part of the evidence stands for
the whole. Each case is one a learned shortcut used to let a failing tree land."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan

from forge.base import box

PY = shlex.quote(sys.executable)
PYTEST = f"env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -q -p no:cacheprovider"
LIB = "FACTOR = 1\n\n\ndef add(a, b):\n    return (a + b) * FACTOR\n"
TEST_B = "import lib\n\n\ndef test_add():\n    assert lib.add(2, 2) == 4\n"
CLOCK = "def test_clock():\n    assert False, 'the clock is off'\n\n\ndef test_clock_skew():\n    pass\n"


def suite(repo: Path, *, clock: bool = False) -> None:
    (repo / "lib.py").write_text(LIB)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_b.py").write_text(TEST_B)
    if clock:
        (repo / "tests" / "test_a.py").write_text(CLOCK)
    (repo / "conftest.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\n")
    commit_all(repo, "a suite")


def shell_task(tid: str, run: str, files: list[str]) -> str:
    return (
        f"[[task]]\nid = {json.dumps(tid)}\nrun = {json.dumps(run)}\nfiles = {json.dumps(files)}\n"
    )


def innocents(n: int) -> str:
    return "".join(shell_task(f"i{k}", f"echo {k} > i{k}.txt", [f"i{k}.txt"]) for k in range(n))


def known_tests(repo: Path) -> dict[str, dict[str, Any]]:
    cp = run_forge(repo, "tests", "--json")
    assert cp.returncode == 0, cp.stderr
    return {r["test"]: r for r in json.loads(cp.stdout)}


BREAK_ADD = "sed -i 's/(a + b)/(a - b)/' lib.py"


@pytest.mark.timeout(600)
def test_a_polluting_test_is_blamed_as_order_dependent_and_quarantines_nothing(
    repo: Path, tmp_path: Path
) -> None:
    suite(repo)
    # A task adds a test that sets a module global; tests/test_b.py::test_add then
    # fails in the whole run and passes alone.
    pollute = (
        "printf 'import lib\\n\\n\\ndef test_setup():\\n    lib.FACTOR = 2\\n' > tests/test_a.py"
    )
    body = f"verify = '{PYTEST}'\nverify_reruns = 1\ngate = \"end\"\n"
    body += innocents(2) + shell_task("pollute", pollute, ["tests/test_a.py"])
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"i0": "MERGED", "i1": "MERGED", "pollute": "FAILED"}
    reason = state(repo)["tasks"]["pollute"]["reason"]
    assert "tests/test_b.py::test_add fails in the whole run, passes alone (order-dependent)" in (
        reason
    ), reason
    known = known_tests(repo)
    assert not known["tests/test_b.py::test_add"]["quarantined"], known
    # The landed tree passes a fresh whole run.
    landed = tmp_path / "landed"
    head = state(repo)["integration"]
    git(repo, "worktree", "add", "-q", "--detach", str(landed), head)
    fresh = subprocess.run(PYTEST, shell=True, cwd=landed, capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stdout


@pytest.mark.timeout(600)
def test_a_pytest_x_lane_with_a_quarantined_test_does_not_pass_a_broken_tree(
    repo: Path, tmp_path: Path
) -> None:
    suite(repo, clock=True)
    assert run_forge(repo, "tests", "--quarantine", "tests/test_a.py::test_clock").returncode == 0
    body = f"verify = '{PYTEST} -x tests'\nverify_reruns = 1\n"
    body += shell_task("breaker", BREAK_ADD, ["lib.py"])
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"breaker": "FAILED"}
    reason = state(repo)["tasks"]["breaker"]["reason"]
    assert "tests/test_b.py::test_add" in reason and "test_clock" not in reason, reason


@pytest.mark.timeout(600)
def test_the_forgiven_test_is_left_out_by_its_exact_id_and_named(
    repo: Path, tmp_path: Path
) -> None:
    suite(repo, clock=True)
    assert run_forge(repo, "tests", "--quarantine", "tests/test_a.py::test_clock").returncode == 0
    body = f"verify = '{PYTEST} tests'\n" + shell_task("fine", "echo 1 > fine.txt", ["fine.txt"])
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    data = json.loads(run_forge(repo, "status", "--json").stdout)
    by = data["tasks"][0]["verified_by"] if isinstance(data["tasks"], list) else None
    summary = json.dumps(data)
    assert "1 deselected: tests/test_a.py::test_clock (quarantined" in summary, summary
    # `test_clock_skew` (which `--deselect tests/test_a.py::test_clock` would drop too)
    # ran: the history holds its run of this verification.
    known = known_tests(repo)
    assert known["tests/test_a.py::test_clock_skew"]["runs"] >= 1, known
    assert by is None or by["verdict"] == "PASS"


@pytest.mark.timeout(600)
def test_a_two_command_lane_with_a_forgiven_failure_does_not_pass_a_broken_tree(
    repo: Path, tmp_path: Path
) -> None:
    suite(repo, clock=True)
    (repo / "tests" / "check.py").write_text(
        "import sys\nsys.path.insert(0, '.')\nimport lib\nsys.exit(0 if lib.add(2, 2) == 4 else 1)\n"
    )
    commit_all(repo, "a check")
    assert run_forge(repo, "tests", "--quarantine", "tests/test_a.py::test_clock").returncode == 0
    lane = f"{PYTEST} tests/test_a.py; {PY} tests/check.py"
    body = f'verify = "{lane}"\nverify_reruns = 1\n'
    body += shell_task("breaker", BREAK_ADD, ["lib.py"])
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo)["breaker"] != "MERGED"
    head = git(repo, "rev-parse", state(repo)["integration"])
    assert head == git(repo, "rev-parse", "main")


@pytest.mark.timeout(600)
def test_a_rewritten_report_and_a_planted_history_row_change_no_verdict(
    repo: Path, tmp_path: Path
) -> None:
    suite(repo)
    history = repo / ".git" / "forge" / "private" / "history.sqlite"
    # The culprit breaks add(), plants a person's word quarantining its own broken test
    # in forge's history, and adds a test whose exit handler rewrites any report file
    # it can find to name an innocent test.
    liar = (
        "import atexit, os, re\n\n\n"
        "def _lie():\n"
        "    for word in os.environ.get('PYTEST_ADDOPTS', '').split():\n"
        "        m = re.match(r'--junit-?xml=(.*)', word)\n"
        "        if m:\n"
        "            open(m[1], 'w').write('<testsuite><testcase classname=\"tests.test_c\" "
        'name="test_innocent" file="tests/test_c.py"><failure message="x"/></testcase>'
        "</testsuite>')\n\n\n"
        "atexit.register(_lie)\n\n\n"
        "def test_innocent():\n    pass\n"
    )
    (tmp_path / "test_c.py").write_text(liar)
    plant = (
        f"{PY} -c \"import sqlite3, time; c = sqlite3.connect('{history}'); "
        "c.execute('CREATE TABLE IF NOT EXISTS test_words (test TEXT, word TEXT, at REAL)'); "
        "c.execute('INSERT INTO test_words (test, word, at) VALUES (?, ?, ?)', "
        "('tests/test_b.py::test_add', 'quarantine', time.time() + 1)); c.commit()\""
    )
    run = f"{BREAK_ADD} && cp {tmp_path / 'test_c.py'} tests/test_c.py && {plant}"
    body = f"verify = '{PYTEST}'\nverify_reruns = 1\n"
    body += shell_task("liar", run, ["lib.py", "tests/test_c.py"])
    # (a history must exist for the task to plant a row in it)
    assert run_forge(repo, "tests", "--quarantine", "tests/none.py::test_none").returncode == 0
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"liar": "FAILED"}
    reason = state(repo)["tasks"]["liar"]["reason"]
    assert "tests/test_b.py::test_add" in reason, reason
    known = known_tests(repo)
    assert not known.get("tests/test_c.py::test_innocent", {}).get("quarantined"), known
    assert not known["tests/test_b.py::test_add"]["quarantined"], known
    with sqlite3.connect(history) as con:
        planted = con.execute("SELECT COUNT(*) FROM test_words WHERE seal IS NULL").fetchone()
    # In a box the task wrote into an empty folder of its own; with no namespace here
    # the row is planted, and forge ignores it (it carries no seal).
    assert planted == ((0,) if box.unavailable() is None else (1,))


def test_a_history_that_is_not_forges_is_one_clear_error(repo: Path) -> None:
    history = repo / ".git" / "forge" / "private" / "history.sqlite"
    history.parent.mkdir(parents=True, exist_ok=True)
    history.write_text("not a database at all\n" * 10)
    cp = run_forge(repo, "tests")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stderr
    assert str(history) in cp.stderr and "move it aside" in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    history.unlink()
    history.mkdir()
    cp = run_forge(repo, "tests")
    assert cp.returncode == 2 and "is a folder" in cp.stderr, cp.stderr


@pytest.mark.timeout(600)
def test_a_red_base_never_enters_a_culprits_reason_and_every_run_is_counted(
    repo: Path, tmp_path: Path
) -> None:
    suite(repo)
    (repo / "tests" / "test_red.py").write_text(
        "import pathlib\n\n\ndef test_red():\n    assert pathlib.Path('fixed.txt').exists()\n"
    )
    commit_all(repo, "a test red on main")
    # The culprit is the last task of its batch: it was once blamed with the batch's
    # whole failure list, the red test included.
    body = f"verify = '{PYTEST}'\nverify_reruns = 1\ngate = \"end\"\n"
    body += innocents(1) + shell_task("breaker", BREAK_ADD, ["lib.py"])
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--json")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert statuses(repo) == {"i0": "MERGED", "breaker": "FAILED"}
    reason = state(repo)["tasks"]["breaker"]["reason"]
    assert "tests/test_b.py::test_add" in reason and "test_red" not in reason, reason
    failures = state(repo)["tasks"]["breaker"]["attempts"][-1]["failures"]
    assert [f["test"] for f in failures] == ["tests/test_b.py::test_add"]
    data = json.loads(cp.stdout)
    red = {
        "lane": "verify",
        "test": "tests/test_red.py::test_red",
        "why": "already failing on the head",
    }
    assert data["forgiven"] == [red], data["forgiven"]
    # the head (twice), the regression alone, its bisection step, the culprit's
    # confirming rerun, and the red test on the landed tree
    assert data["gate_subset_runs"] >= 5, data
    said = "PASS (1 deselected: tests/test_red.py::test_red (already failing on the head))"
    assert said in run_forge(repo, "status").stdout
