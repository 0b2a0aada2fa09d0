"""A real pytest suite in a test repository, one of its tests flaky on a pattern.

The flaky test reads how often it ran from a counter file outside the checkout and
fails when the pattern says `F` at that run (the pattern's last letter repeats).
With `per_tree`, it counts its runs on each tree apart (a tree told by its task
files and lib.py), so what it does on one tree does not hang on the order in which
the gate runs the others.
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
SUITE = """import hashlib
import pathlib

import pytest

from lib import add

ROOT = pathlib.Path(__file__).parent.parent
COUNTER = pathlib.Path({counter!r})
PATTERN = {pattern!r}
PER_TREE = {per_tree!r}


def counter():
    if not PER_TREE:
        return COUNTER
    tree = sorted(p.name for p in ROOT.glob("*.txt")) + [(ROOT / "lib.py").read_text()]
    return COUNTER.with_name(COUNTER.name + "-" + hashlib.sha1(repr(tree).encode()).hexdigest())


def test_add():
    assert add(2, 2) == 4, "add is broken"


@pytest.mark.parametrize("size", ["1 Byte", "2 Bytes"])
def test_sizes(size):
    assert size.endswith(("Byte", "Bytes"))


def test_clock_skew():
    mine = counter()
    n = int(mine.read_text()) if mine.exists() else 0
    mine.write_text(str(n + 1))
    mark = PATTERN[n] if n < len(PATTERN) else PATTERN[-1]
    assert mark == "P", f"clock skew at run {{n + 1}}"
"""


def pytest_suite(repo: Path, counter: Path, pattern: str = "P", *, per_tree: bool = False) -> str:
    """Commit the suite; the commit."""
    (repo / "lib.py").write_text(LIB)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "tests" / "test_lib.py").write_text(
        SUITE.format(counter=str(counter), pattern=pattern, per_tree=per_tree)
    )
    (repo / "conftest.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    return commit_all(repo, "a pytest suite")
