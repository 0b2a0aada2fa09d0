"""What forge learns of each test, through the real CLI on a real pytest suite:
every run's outcome per test (ids whole, spaces and all), flaky on evidence,
quarantined, a person's and a team's word, and a test runner that ran no test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.gitkit import commit_all, run_forge
from helpers.suites import ADD, FLAKY, PYTEST, pytest_suite


def forge_toml(repo: Path, body: str) -> None:
    (repo / "forge.toml").write_text(body)
    commit_all(repo, "forge.toml")


def listed(repo: Path, *args: str) -> list[dict[str, Any]]:
    cp = run_forge(repo, "tests", "--json", *args)
    assert cp.returncode == 0, cp.stderr
    rows: list[dict[str, Any]] = json.loads(cp.stdout)
    return rows


def by_test(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["test"]: r for r in rows}


def test_each_test_is_recorded_with_its_full_id_and_a_flake_is_named_then_quarantined(
    repo: Path, tmp_path: Path
) -> None:
    pytest_suite(repo, tmp_path / "n", "FPF")
    forge_toml(repo, f"[verify]\ncommand = '''{PYTEST}'''\nreruns = 1\n")
    first = run_forge(repo, "verify")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"FLAKY (flaky: {FLAKY})" in first.stdout
    rows = by_test(listed(repo))
    assert set(rows) == {
        ADD,
        FLAKY,
        "tests/test_lib.py::test_sizes[1 Byte]",
        "tests/test_lib.py::test_sizes[2 Bytes]",
    }
    flaky = rows[FLAKY]
    assert (flaky["runs"], flaky["failures"], flaky["flaky"], flaky["quarantined"]) == (
        2,
        1,
        True,
        True,
    )
    assert flaky["flake_rate"] == 0.5
    # when it first showed flaky: the pass that followed its failure on one tree
    assert flaky["flaky_since"] and flaky["flaky_since"] <= flaky["last_seen"]
    assert rows[ADD]["flaky_since"] is None and rows[ADD]["blamed"] == []
    shown = run_forge(repo, "tests").stdout
    assert f"landed (50%, since {flaky['flaky_since'][:10]})" in shown, shown
    assert flaky["last_failure"]["message"].startswith("AssertionError: clock skew at run 1")
    assert rows[ADD]["runs"] == 2 and not rows[ADD]["flaky"] and rows[ADD]["last_failure"] is None
    assert [r["test"] for r in listed(repo, "--flaky")] == [FLAKY]
    # Quarantined, it is left out of the whole run by its exact id, and named.
    again = run_forge(repo, "verify", "--force")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"PASS (1 deselected: {FLAKY} (quarantined, flaky))" in again.stdout
    rows = by_test(listed(repo))
    assert rows[FLAKY]["runs"] == 2 and rows[ADD]["runs"] == 3
    assert [r["test"] for r in listed(repo, "--failing")] == []
    assert run_forge(repo, "tests", "--forget", FLAKY).returncode == 0
    none = run_forge(repo, "tests", "--flaky")
    assert none.returncode == 0
    assert none.stdout == "no flaky test among the 3 tests forge knows (`forge tests` lists them)\n"


def test_a_long_parametrized_id_is_cut_in_the_table_and_whole_in_the_logs() -> None:
    from forge.commands.tests import TEST_WIDTH, KnownTest, render

    long_id = "tests/test_lib.py::test_sizes[" + "x" * 280 + "-end]"
    row: KnownTest = {
        "test": long_id,
        "lane": "verify",
        "runs": 2,
        "failures": 1,
        "flaky": False,
        "flaky_on": None,
        "flake_rate": None,
        "quarantined": False,
        "why": None,
        "last_failure": {"tree": "a" * 40, "message": "boom", "log": "/tmp/v.log", "at": "x"},
        "last_seen": "2026-12-07T00:00:00Z",
        "flaky_since": None,
        "blamed": [],
    }
    lines = render([row])
    assert lines[0].index("lane") == TEST_WIDTH + 2, lines[0]
    assert lines[2].startswith("tests/test_lib.py::test_sizes[xxx") and "x-end]" in lines[2]
    assert f"  {long_id}: log /tmp/v.log" in lines


@pytest.mark.slow
def test_a_persons_release_and_quarantine_are_heard(repo: Path, tmp_path: Path) -> None:
    pytest_suite(repo, tmp_path / "n", "FPF")
    forge_toml(repo, f"[verify]\ncommand = '''{PYTEST}'''\nreruns = 1\n")
    assert run_forge(repo, "verify").returncode == 0
    released = run_forge(repo, "tests", "--release", FLAKY)
    assert released.returncode == 0 and "released" in released.stdout
    assert not by_test(listed(repo))[FLAKY]["quarantined"]
    failed = run_forge(repo, "verify", "--force")  # fails on its third run, released
    assert failed.returncode == 5, failed.stdout + failed.stderr
    assert FLAKY in failed.stderr
    held = run_forge(repo, "tests", "--quarantine", ADD)
    assert held.returncode == 0
    assert by_test(listed(repo))[ADD]["quarantined"]
    gone = run_forge(repo, "tests", "--forget", FLAKY)
    assert gone.returncode == 0
    assert FLAKY not in by_test(listed(repo))
    unknown = run_forge(repo, "tests", "--release", "tests/nope.py::test_x")
    assert unknown.returncode == 2 and "no test `tests/nope.py::test_x`" in unknown.stderr


def test_a_teams_quarantine_in_forge_toml_and_quarantine_off(repo: Path, tmp_path: Path) -> None:
    pytest_suite(repo, tmp_path / "n", "F")
    forge_toml(
        repo,
        f"[verify]\ncommand = '''{PYTEST}'''\nreruns = 0\n\n[tests]\nquarantine = [\"{FLAKY}\"]\n",
    )
    held = run_forge(repo, "verify")
    assert held.returncode == 0, held.stdout + held.stderr
    assert f"PASS (1 deselected: {FLAKY} (quarantined, forge.toml))" in held.stdout
    row = by_test(listed(repo))[ADD]
    assert row["runs"] == 1 and FLAKY not in by_test(listed(repo))


@pytest.mark.slow
def test_known_flaky_test_fails_the_verification_with_quarantine_off(
    repo: Path, tmp_path: Path
) -> None:
    pytest_suite(repo, tmp_path / "n", "FPF")
    forge_toml(
        repo, f"[verify]\ncommand = '''{PYTEST}'''\nreruns = 1\n\n[tests]\nquarantine = \"off\"\n"
    )
    assert run_forge(repo, "verify").returncode == 0  # FLAKY
    row = by_test(listed(repo))[FLAKY]
    assert row["flaky"] and not row["quarantined"]
    failed = run_forge(repo, "verify", "--force")
    assert failed.returncode == 5, failed.stdout + failed.stderr


def test_a_test_runner_that_ran_no_test_is_not_a_pass(repo: Path, tmp_path: Path) -> None:
    pytest_suite(repo, tmp_path / "n")
    forge_toml(
        repo,
        "[verify.lanes.unit]\n"
        f"command = '''{PYTEST} -k no_such_test'''\n"
        "[verify.lanes.lint]\ncommand = 'true'\n",
    )
    empty = run_forge(repo, "verify")
    assert empty.returncode == 5, empty.stdout + empty.stderr
    assert "lane unit: EMPTY" in empty.stdout
    assert "ran no tests" in empty.stderr and "allow_empty = true" in empty.stderr
    forge_toml(
        repo,
        "[verify.lanes.unit]\n"
        f"command = '''{PYTEST} -k no_such_test'''\nallow_empty = true\n"
        "[verify.lanes.lint]\ncommand = 'true'\n",
    )
    allowed = run_forge(repo, "verify")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_a_lane_that_names_its_report_is_read_there(repo: Path, tmp_path: Path) -> None:
    pytest_suite(repo, tmp_path / "n")
    forge_toml(
        repo,
        "[verify.lanes.unit]\n"
        f"command = '''{PYTEST} --junitxml=build/unit.xml'''\n"
        'junit = "build/unit.xml"\n',
    )
    cp = run_forge(repo, "verify")
    assert cp.returncode == 0, cp.stdout + cp.stderr  # the report is not a change
    assert {r["lane"] for r in listed(repo)} == {"unit"}
    assert len(listed(repo)) == 4


def test_a_bad_lane_table_is_one_line_naming_the_key(repo: Path) -> None:
    forge_toml(repo, "[verify.lanes.unit]\ncommand = 'pytest'\njunitxml = 'x.xml'\n")
    cp = run_forge(repo, "verify")
    assert cp.returncode == 2
    assert "lane `unit`: unknown key `junitxml`" in cp.stderr
    assert "Traceback" not in cp.stderr


def test_a_pytest_run_forge_asked_no_report_of_is_judged_by_its_summary_line(
    repo: Path, tmp_path: Path
) -> None:
    # As pytest in a container: forge's PYTEST_ADDOPTS does not reach it.
    pytest_suite(repo, tmp_path / "n")
    forge_toml(repo, f"verify = '''env -u PYTEST_ADDOPTS {PYTEST.removeprefix('env ')}'''\n")
    cp = run_forge(repo, "verify")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert listed(repo) == []  # no outcome recorded: there was no report
