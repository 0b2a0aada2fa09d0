"""The sandbox is the default where it holds: a plan that says nothing runs in it
(and the run says so once), `sandbox = false` or `--no-sandbox` turns it off, and
where it cannot hold the run says why once and goes on without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, write_plan

from forge.base import sandbox

TASK = '[[task]]\nid = "a"\nfiles = ["."]\nrun = "cat /proc/1/comm > pid1.txt"\n'
ON = "sandbox: on (bubblewrap; `sandbox = false` or --no-sandbox turns it off)"


@pytest.fixture(autouse=True)
def default_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.MODE_VAR)


def _pid1(repo: Path) -> str:
    return git(repo, "show", "forge/p-integration:pid1.txt")


@pytest.mark.skipif(sandbox.unavailable() is not None, reason="no sandbox here")
def test_a_plan_that_says_nothing_runs_in_the_sandbox(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, TASK))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert _pid1(repo) == "bwrap"
    assert (cp.stdout + cp.stderr).count(ON) == 1
    doctor = run_forge(repo, "doctor")
    assert "sandbox mode: on by default" in doctor.stdout, doctor.stdout


@pytest.mark.skipif(sandbox.unavailable() is not None, reason="no sandbox here")
@pytest.mark.parametrize("how", ["plan", "flag"])
def test_the_plan_or_the_flag_turns_it_off(repo: Path, tmp_path: Path, how: str) -> None:
    head = "sandbox = false\n" if how == "plan" else ""
    flag = ("--no-sandbox",) if how == "flag" else ()
    cp = plan_and_run(repo, write_plan(tmp_path, head + TASK), *flag)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert _pid1(repo) != "bwrap"
    assert "sandbox:" not in cp.stdout + cp.stderr


def test_where_it_cannot_hold_the_run_says_so_once_and_goes_on(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"  # everything on PATH but bubblewrap
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name != "bwrap" and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(Path(folder) / name)
    monkeypatch.setenv("PATH", str(bin_dir))
    cp = plan_and_run(repo, write_plan(tmp_path, TASK))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    said = [line for line in (cp.stdout + cp.stderr).splitlines() if "sandbox: off:" in line]
    assert len(said) == 1 and "bubblewrap" in said[0], cp.stdout + cp.stderr
    assert _pid1(repo) != "bwrap"
    assert "sandbox mode: off by default" in run_forge(repo, "doctor").stdout
