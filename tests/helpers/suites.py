"""A real pytest suite in a test repository, one of its tests flaky on a pattern.

The flaky test reads how often it ran from a counter file outside the checkout and
fails when the pattern says `F` at that run (the pattern's last letter repeats).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from helpers.gitkit import commit_all

PYTEST = (
    f"env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q "
    "-p no:cacheprovider"
)
FLAKY = "tests/test_lib.py::test_clock_skew"
ADD = "tests/test_lib.py::test_add"

LIB = "def add(a, b):\n    return a + b\n"
SUITE = """import pathlib

import pytest

from lib import add

COUNTER = pathlib.Path({counter!r})
PATTERN = {pattern!r}


def test_add():
    assert add(2, 2) == 4, "add is broken"


@pytest.mark.parametrize("size", ["1 Byte", "2 Bytes"])
def test_sizes(size):
    assert size.endswith(("Byte", "Bytes"))


def test_clock_skew():
    n = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(n + 1))
    mark = PATTERN[n] if n < len(PATTERN) else PATTERN[-1]
    assert mark == "P", f"clock skew at run {{n + 1}}"
"""


def pytest_suite(repo: Path, counter: Path, pattern: str = "P") -> str:
    """Commit the suite; the commit."""
    (repo / "lib.py").write_text(LIB)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "tests" / "test_lib.py").write_text(SUITE.format(counter=str(counter), pattern=pattern))
    (repo / "conftest.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    return commit_all(repo, "a pytest suite")
