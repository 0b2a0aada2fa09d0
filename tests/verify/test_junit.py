"""Reading a runner's JUnit report: pytest's node ids rebuilt whole (file, class,
parameters with spaces), a test reported twice keeps its worst outcome, and which
commands forge recognises as test runners."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from forge.verify.junit import FAILED, PASSED, SKIPPED, node_id, read_report, runner_of


def test_pytest_node_ids_are_rebuilt_whole_from_xunit1() -> None:
    assert node_id("tests.test_x", "test_n[a-1 Byte]", "tests/test_x.py") == (
        "tests/test_x.py::test_n[a-1 Byte]"
    )
    assert node_id("tests.test_x.TestA.TestB", "test_y", "tests/test_x.py") == (
        "tests/test_x.py::TestA::TestB::test_y"
    )
    assert node_id("pkg.Suite", "TestX", None) == "pkg.Suite.TestX"
    assert node_id("", "TestX", None) == "TestX"


def test_a_real_pytest_report_gives_every_outcome(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_s.py").write_text(
        "import pytest\n"
        "class TestC:\n"
        "    @pytest.mark.parametrize('x', ['1 Byte', '2 Bytes'])\n"
        "    def test_p(self, x):\n"
        "        assert x == '1 Byte', 'too big'\n"
        "@pytest.mark.skip\n"
        "def test_s():\n"
        "    pass\n"
        "@pytest.fixture\n"
        "def bad():\n"
        "    yield\n"
        "    raise RuntimeError('teardown')\n"
        "def test_t(bad):\n"
        "    assert False, 'and fails'\n"
    )
    report = tmp_path / "r.xml"
    args = ["-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1", f"--junitxml={report}"]
    subprocess.run(
        [sys.executable, "-m", "pytest", *args, "tests"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"},
    )
    got = {t.test: (t.outcome, t.message) for t in read_report(report) or []}
    assert got["tests/test_s.py::TestC::test_p[1 Byte]"] == (PASSED, "")
    outcome, message = got["tests/test_s.py::TestC::test_p[2 Bytes]"]
    assert outcome == FAILED and message.startswith("AssertionError: too big")
    assert got["tests/test_s.py::test_s"][0] == SKIPPED
    assert got["tests/test_s.py::test_t"][0] == "error"  # failed, then its teardown erred
    assert len(got) == 4


def test_a_missing_or_foreign_file_is_no_report(tmp_path: Path) -> None:
    assert read_report(tmp_path / "none.xml") is None
    (tmp_path / "x.xml").write_text("<html/>")
    assert read_report(tmp_path / "x.xml") is None


@pytest.mark.parametrize(
    ("command", "runner"),
    [
        ("pytest -q", "pytest"),
        (f"{shlex.quote(sys.executable)} -m pytest tests", "pytest"),
        ("cd sub && .venv/bin/pytest", "pytest"),
        ("python -m unittest discover", "unittest"),
        ("npx jest --ci", "jest"),
        ("npx vitest run", "vitest"),
        ("go test ./...", "go"),
        ("cargo test --all", "cargo"),
        ("ruff check .", None),
        ("make check", None),
    ],
)
def test_which_commands_are_test_runners(command: str, runner: str | None) -> None:
    assert runner_of(command) == runner


def test_a_doctests_failure_says_what_was_expected_and_what_came(repo: Path) -> None:
    from helpers.gitkit import commit_all, run_forge
    from helpers.suites import PYTEST

    (repo / "words.py").write_text(
        'def natural_list(items):\n    """Natural list.\n\n'
        '    >>> natural_list(["one", "two"])\n    \'one and two\'\n    """\n'
        '    return ", ".join(items)\n\n\n'
        'def boom():\n    """Boom.\n\n    >>> boom()\n    1\n    """\n'
        '    raise ValueError("no boom here")\n'
    )
    (repo / "forge.toml").write_text(
        f"[verify]\ncommand = '''{PYTEST} --doctest-modules words.py'''\nreruns = 0\n"
    )
    commit_all(repo, "doctests")
    cp = run_forge(repo, "verify")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    out = cp.stdout + cp.stderr
    assert "natural_list([\"one\", \"two\"]): expected 'one and two', got 'one, two'" in out, out
    assert "boom(): raised ValueError('no boom here')" in out, out
    assert "Natural list." not in out
