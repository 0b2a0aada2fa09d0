"""Verdicts you can bet on, through the real CLI on a Python project tested with
pytest: the failing test is named wherever the verdict is shown; what an earlier
verification left in a checkout (an ignored `.pyc`, an index flag) decides nothing;
a hanging lane runs out of time and is blamed like any failure."""

from __future__ import annotations

import json
import py_compile
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, commit_all, git, run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan

from forge.git.repo import discover
from forge.verify.checkout import checkout_path

PY = shlex.quote(sys.executable)
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider tests"
TEST = "tests/test_calc.py::test_max_age"
BROKEN = "sed -i s/24/25/ calc.py"  # same size: a stale .pyc's favourite change


@pytest.fixture
def project(repo: Path) -> Path:
    """A Python project whose pytest suite passes, verified by `forge.toml`."""
    (repo / "calc.py").write_text("def max_age(days):\n    return days * 24\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import max_age\n\n\n"
        "def test_max_age():\n    assert max_age(2) == 48\n\n\n"
        "def test_zero():\n    assert max_age(0) == 0\n"
    )
    (repo / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    (repo / "forge.toml").write_text(
        f'[verify]\nreruns = 0\ngrace = "0.5s"\n[verify.lanes]\nunit = {json.dumps(PYTEST)}\n'
    )
    commit_all(repo, "calc and its tests")
    return repo


def checkout(repo: Path) -> Path:
    """The lane's checkout: plans, `forge verify` and the hooks share a pool's member."""
    (member,) = (checkout_path(discover(repo), "x", "unit").parents[1]).glob("shared-*-1")
    return member / "unit"


def in_checkout(path: Path, *args: str) -> str:
    return git(path, f"--git-dir={path / '.git'}", f"--work-tree={path}", *args)


def plant_stale_pyc(path: Path) -> None:
    """Bytecode of the good calc.py that Python never checks against the source."""
    cache = path / "__pycache__" / f"calc.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(
        str(path / "calc.py"),
        cfile=str(cache),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )


def plant_skip_worktree(path: Path) -> None:
    """A tracked test hidden from `git status` and rewritten to pass."""
    in_checkout(path, "update-index", "--skip-worktree", "tests/test_calc.py")
    (path / "tests" / "test_calc.py").write_text("def test_max_age():\n    pass\n")
    assert in_checkout(path, "status", "--porcelain") == ""


def break_calc(repo: Path) -> None:
    subprocess.run(BROKEN, shell=True, cwd=repo, check=True)
    commit_all(repo, "break max_age")


def test_a_task_that_breaks_a_test_is_named_everywhere(project: Path, tmp_path: Path) -> None:
    body = f'[[task]]\nid = "t"\nrun = "{BROKEN}"\nfiles = ["calc.py"]\n'
    cp = plan_and_run(project, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    reason = state(project)["tasks"]["t"]["reason"]
    assert reason == f"breaks verification: lane unit: {TEST} (assert 50 == 48)", reason
    # (its event line: its blame on a named test waits for evidence until the gate is done)
    assert f"t: blamed, waiting for evidence ({reason})" in cp.stderr and TEST in cp.stdout

    assert TEST in run_forge(project, "status").stdout
    history = run_forge(project, "status", "t").stdout
    assert f"  failed in lane unit: {TEST} (assert 50 == 48)" in history
    data = json.loads(run_forge(project, "status", "t", "--json").stdout)
    assert data["failures"] == [{"lane": "unit", "test": TEST, "message": "assert 50 == 48"}]
    assert data["history"][-1]["failures"] == data["failures"]

    assert run_forge(project, "report").returncode == 0
    page = (project / ".git" / "forge" / "plans" / "p" / "report.html").read_text()
    log = Path(data["history"][-1]["log"])
    assert log.name == "unit-1.log" and TEST in page
    assert ">verify<" in page  # the failing log, among the attempt's logs

    # The pre-push hook names it too.
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(project, "remote", "add", "origin", str(bare))
    assert run_forge(project, "hooks", "install").returncode == 0
    commit = data["history"][-1]["commit"]
    push = subprocess.run(
        ["git", "push", "origin", f"{commit}:refs/heads/main"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert push.returncode != 0
    assert "push blocked" in push.stderr and f"{TEST} (assert 50 == 48)" in push.stderr


@pytest.mark.slow
def test_what_an_earlier_run_left_in_a_checkout_does_not_fool_the_gate(
    project: Path, tmp_path: Path
) -> None:
    first = '[[task]]\nid = "a"\nrun = "echo a > a.txt"\nfiles = ["a.txt"]\n'
    plan = write_plan(tmp_path, first)
    cp = plan_and_run(project, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    path = checkout(project)
    plant_stale_pyc(path)
    plant_skip_worktree(path)
    plan.write_text(
        plan.read_text()
        + f'[[task]]\nid = "b"\nrun = "{BROKEN}"\nfiles = ["calc.py"]\ndeps = ["a"]\n'
    )
    cp = plan_and_run(project, plan)
    # forge's git dir of the checkout is its own: the flag set in the checkout's
    # `.git` hides nothing, and the edit is a change forge did not make.
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "holds changes forge did not make (tests/test_calc.py)" in cp.stderr
    assert statuses(project)["b"] != "MERGED"


def test_a_stale_pyc_left_in_a_checkout_is_removed(project: Path) -> None:
    assert run_forge(project, "verify").returncode == 0
    path = checkout(project)
    plant_stale_pyc(path)
    break_calc(project)
    res = run_forge(project, "verify", "--force")
    assert res.returncode == 5, res.stdout + res.stderr
    assert f"failed: {TEST} (assert 50 == 48)" in res.stdout


def test_an_edit_hidden_by_an_index_flag_in_a_checkout_is_refused(project: Path) -> None:
    assert run_forge(project, "verify").returncode == 0
    plant_skip_worktree(checkout(project))
    break_calc(project)
    res = run_forge(project, "verify")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "holds changes forge did not make (tests/test_calc.py)" in res.stderr


def test_a_lane_that_sets_an_index_flag_changed_its_checkout(project: Path) -> None:
    hide = "git update-index --skip-worktree tests/test_calc.py && echo '' > tests/test_calc.py"
    (project / "forge.toml").write_text(
        f"[verify]\nreruns = 2\n[verify.lanes]\nunit = {json.dumps(hide + ' && ' + PYTEST)}\n"
    )
    commit_all(project, "a lane that hides its change")
    res = run_forge(project, "verify")
    assert res.returncode == 5, res.stdout + res.stderr
    assert "changed the checkout: tests/test_calc.py\n" in res.stdout  # the flag hid nothing
    assert "(1 run)" in res.stdout  # never taken for a flake


def test_a_hanging_lane_runs_out_of_time_and_is_blamed(project: Path, tmp_path: Path) -> None:
    hang = "if test -f hang.txt; then exec sleep 60; fi"
    (project / "forge.toml").write_text(
        f'[verify]\nreruns = 0\ntimeout = "3s"\ngrace = "0.5s"\n'
        f"[verify.lanes]\nunit = {json.dumps(hang)}\n"
    )
    commit_all(project, "a 3 s time limit")
    body = '[[task]]\nid = "h"\nrun = "echo > hang.txt"\nfiles = ["hang.txt"]\n'
    cp = plan_and_run(project, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    reason = state(project)["tasks"]["h"]["reason"]
    assert reason.startswith("breaks verification: lane unit timed out after 3s"), cp.stdout


def test_every_lane_has_a_time_limit_and_forge_plan_says_it(project: Path, tmp_path: Path) -> None:
    task = '[[task]]\nid = "x"\nrun = "true"\nfiles = ["x"]\n'
    out = run_forge(project, "plan", str(write_plan(tmp_path, 'verify = "true"\n' + task))).stdout
    assert "verification: 1 lane (verify), each run limited to 1h ([verify] timeout)" in out
    out = run_forge(project, "plan", str(write_plan(tmp_path, task))).stdout
    assert "verification: 1 lane (unit), each run limited to 1h ([verify] timeout)" in out
    out = run_forge(project, "plan", "--check", str(write_plan(tmp_path, task))).stdout
    assert "verification: forge.toml's [verify], if it has one" in out, out


@pytest.mark.slow
def test_the_culprits_retry_prompt_shows_its_failing_tests(project: Path, tmp_path: Path) -> None:
    (project / "tests" / "test_extra.py").write_text(
        "import os\n\n\ndef test_no_extra():\n    assert not os.path.exists('extra.txt')\n"
    )
    commit_all(project, "no extra file")
    copies = tmp_path / "prompt-$FORGE_ATTEMPT.md"
    copy = f'{PY} {FAKES / "agent_copy_prompt.py"} "{copies}" extra.txt'
    agent = json.dumps(["bash", "-c", copy])
    body = (
        f'agent = "fake"\n[agents.fake]\ncommand = {agent}\n'
        '[[task]]\nid = "t"\nprompt = "add extra"\nfiles = ["extra.txt"]\n'
    )
    cp = plan_and_run(project, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert "tests/test_extra.py::test_no_extra" in state(project)["tasks"]["t"]["reason"]
    assert run_forge(project, "retry", "t").returncode == 5
    second = (tmp_path / "prompt-2.md").read_text()
    failing = second.split("### Failing tests", 1)[1].split("### Tail of the failing log")[0]
    assert "tests/test_extra.py::test_no_extra: AssertionError: assert not True" in failing
    assert "assert not os.path.exists('extra.txt')" in failing  # its output in the log
