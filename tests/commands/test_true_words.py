"""Input that once gave a traceback or a misleading word: each is one line that says
what is wrong, the contract's exit code, and nothing changed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.gitkit import git, run_forge
from helpers.runkit import plan_and_run, write_plan


def _one_line(cp: subprocess.CompletedProcess[str], code: int) -> str:
    assert cp.returncode == code, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stderr and cp.stderr.count("\n") == 1, cp.stderr
    return cp.stderr


def test_a_test_id_that_is_not_utf8_is_one_line(repo: Path) -> None:
    said = _one_line(run_forge(repo, "tests", "--quarantine", "t\udcff"), 2)
    assert "`t\\xff` is not UTF-8 text" in said
    assert not (repo / ".git" / "forge" / "private" / "history.sqlite").exists()


def test_draft_refuses_an_agent_that_runs_its_prompt_as_a_script(repo: Path) -> None:
    said = _one_line(run_forge(repo, "draft", "--agent", "shell", "make it faster"), 2)
    assert "`shell` runs its prompt as a script, it is no planner" in said
    assert not (repo / ".git" / "forge" / "drafts").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_a_report_under_a_file_says_that_file_is_no_folder(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, '[[task]]\nid = "a"\nfiles = ["a.txt"]\nrun = "echo a > a.txt"\n')
    assert plan_and_run(repo, plan).returncode == 0
    (tmp_path / "afile").write_text("mine\n")
    said = _one_line(run_forge(repo, "report", "-o", str(tmp_path / "afile" / "sub.html")), 2)
    assert f"{tmp_path / 'afile'} is a file, not a folder" in said, said
    assert (tmp_path / "afile").read_text() == "mine\n"
