"""How a lane's command runs only some tests (forge/run/gate/subsets.py), and the
`gate_on` key of a plan and of forge.toml's [verify]."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gitkit import run_forge
from helpers.runkit import write_plan

from forge.run.gate.subsets import subset_command

IDS = ["tests/test_a.py::test_x[1 Byte]", "tests/test_b.py::test_y"]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q", "pytest -q 'tests/test_a.py::test_x[1 Byte]' tests/test_b.py::test_y"),
        (
            "python -m pytest -q tests -k 'not slow'",
            "python -m pytest -q -k 'not slow' 'tests/test_a.py::test_x[1 Byte]' "
            "tests/test_b.py::test_y",
        ),
        (
            "env A=1 .venv/bin/pytest tests/unit -p no:cacheprovider",
            "env A=1 .venv/bin/pytest -p no:cacheprovider 'tests/test_a.py::test_x[1 Byte]' "
            "tests/test_b.py::test_y",
        ),
    ],
)
def test_a_pytest_lane_runs_the_named_tests_instead_of_its_paths(
    command: str, expected: str
) -> None:
    assert subset_command(command, IDS, first=False) == expected
    first = subset_command(command, IDS, first=True)
    assert first is not None and " -x 'tests/test_a.py" in first


@pytest.mark.parametrize(
    "command",
    ["make test", "cd sub && pytest", "pytest -q | tee log", "npm test", "pytest $(cat args)"],
)
def test_other_commands_cannot_run_a_subset(command: str) -> None:
    assert subset_command(command, IDS, first=True) is None


def test_gate_on_is_checked_in_a_plan_and_in_forge_toml(repo: Path, tmp_path: Path) -> None:
    body = (
        'verify = "true"\ngate_on = "sometimes"\n[[task]]\nid = "a"\nrun = "true"\nfiles = ["."]\n'
    )
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 2 and "gate_on" in cp.stderr, cp.stderr
    (repo / "forge.toml").write_text('[verify]\ncommand = "true"\ngate_on = "green"\n')
    body = '[[task]]\nid = "a"\nrun = "true"\nfiles = ["."]\n'
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 0, cp.stderr
    (repo / "forge.toml").write_text('[verify]\ncommand = "true"\ngate_on = "never"\n')
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 2 and "gate_on" in cp.stderr, cp.stderr
