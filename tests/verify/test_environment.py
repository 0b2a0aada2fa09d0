"""Each worktree has its own environment: `setup` runs in every checkout forge runs
commands in (verification checkouts included) and the plan's `env` reaches every
command, so verification judges the checkout's own code, never a slot's."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers.gitkit import commit_all, git, run_forge
from helpers.runkit import plan_and_run, state, write_plan

# A per-worktree virtual environment, made fast and offline: no pip in the venv, and
# the project "installed" editable by a .pth file naming the worktree's own src/.
SETUP = (
    "python3 -m venv --without-pip .venv && .venv/bin/python -c "
    '\'import os, site; open(os.path.join(site.getsitepackages()[0], \\"mini.pth\\"), '
    '\\"w\\").write(os.path.abspath(\\"src\\"))\' && echo setup >> {count}'
)

PLAN = """
setup = "{setup}"
env = {{ PATH = "{{worktree}}/.venv/bin:$PATH", MINI_MODE = "${{HOME}}-x" }}
[verify.lanes]
unit = "python -m unittest -q"
where = "python -c 'import mini, os; print(mini.__file__, os.environ[\\"MINI_MODE\\"])'"

[[task]]
id = "{task}"
run = "{run}"
files = ["src/"]
"""


def _mini(repo: Path) -> None:
    (repo / "src" / "mini").mkdir(parents=True)
    (repo / "src" / "mini" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "test_mini.py").write_text(
        "import unittest\n\nimport mini\n\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self) -> None:\n        self.assertEqual(mini.add(2, 2), 4)\n"
    )
    (repo / ".gitignore").write_text(".venv/\n__pycache__/\n")
    commit_all(repo, "mini")


def _plan(tmp: Path, task: str, run: str) -> Path:
    count = tmp / "setups"
    return write_plan(
        tmp, PLAN.format(setup=SETUP.format(count=count), task=task, run=run), name="p"
    )


def test_a_broken_commit_fails_verification_written_the_documented_way(
    repo: Path, tmp_path: Path
) -> None:
    _mini(repo)
    plan = _plan(tmp_path, "break", "sed -i 's/a + b/a - b/' src/mini/__init__.py")
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 5, cp.stdout + cp.stderr
    # The gate found the task breaks the verification: the record that failed it.
    task = state(repo)["tasks"]["break"]
    assert task["status"] == "FAILED" and "breaks verification: lane unit" in task["reason"]
    record = (
        repo / ".git" / "forge" / "verify" / "records" / f"{task['verified_by']['record']}.json"
    )
    verification = json.loads(record.read_text())
    assert verification["verdict"] == "FAIL"
    assert verification["lanes"]["unit"]["verdict"] == "FAIL"
    # Each lane imported the code of its own checkout, through its own environment.
    where = Path(verification["lanes"]["where"]["runs"][0]["log"]).read_text()
    # (in the plan's member of the verification pool: `.verify/shared-<setup>-1/<lane>`)
    pool = Path(os.environ["FORGE_WORKTREES"]) / repo.name / ".verify"
    (lane_checkout,) = pool.glob("shared-*-1/where")
    assert f"{lane_checkout}/src/mini/__init__.py" in where
    assert f"{os.environ['HOME']}-x" in where
    # setup ran once in the slot and once in each lane's checkout
    assert (tmp_path / "setups").read_text().count("setup") == 3


def test_setup_runs_again_only_when_it_changes(repo: Path, tmp_path: Path) -> None:
    _mini(repo)
    plan = _plan(tmp_path, "keep", "echo '# kept' >> src/mini/__init__.py")
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert state(repo)["verification"]["verdict"] == "PASS"
    counted = tmp_path / "setups"
    assert counted.read_text().count("setup") == 3
    cp = run_forge(repo, "verify", "--plan", "p", "--force")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert counted.read_text().count("setup") == 3  # the checkouts are set up already
    plan.write_text(plan.read_text().replace("echo setup", "echo setup again"))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "verify", "--plan", "p")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert counted.read_text().count("setup again") == 2  # a changed setup: both lanes


def test_a_setup_that_fails_in_a_checkout_fails_the_lane(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "slot-done"
    body = (
        f'setup = "test -f {marker} && exit 3; touch {marker}"\nverify = "true"\n'
        '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n'
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    lane = state(repo)["verification"]["lanes"]["verify"]
    assert lane["verdict"] == "FAIL"
    assert lane["runs"][0]["kind"] == "setup"
    assert "setup failed in its checkout: exit 3" in cp.stdout + cp.stderr


def test_forge_plan_warns_about_a_shared_environment(repo: Path, tmp_path: Path) -> None:
    task = '[[task]]\nid = "a"\nrun = "true"\nfiles = ["a.txt"]\n'
    old = write_plan(tmp_path, 'setup = "pip install -e ."\nverify = "pytest -q"\n' + task)
    cp = run_forge(repo, "plan", str(old))
    assert cp.returncode == 0, cp.stderr
    assert "forge: warning: `setup` installs with `pip install`" in cp.stderr
    assert "{worktree}/.venv/bin:$PATH" in cp.stderr
    documented = write_plan(
        tmp_path,
        'setup = "python -m venv .venv && .venv/bin/pip install -e ."\n'
        'env = { PATH = "{worktree}/.venv/bin:$PATH" }\n' + task,
    )
    cp = run_forge(repo, "plan", str(documented))
    assert cp.returncode == 0 and "warning" not in cp.stderr, cp.stderr


def test_env_must_be_a_table_of_strings(repo: Path, tmp_path: Path) -> None:
    task = '[[task]]\nid = "a"\nrun = "true"\nfiles = ["a.txt"]\n'
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, 'env = { "1X" = 2 }\n' + task)))
    assert cp.returncode == 2 and "`env`" in cp.stderr
    assert git(repo, "status", "--porcelain") == ""
