"""No wedge, no spin, no traceback: what cannot go on ends in one line (exit 2, or
the command's own code), and what is a candidate's fault is blamed on it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers.gitkit import forge_cmd, git, run_forge
from helpers.runkit import plan_and_run, statuses, write_plan
from helpers.userside import comparable, unchanged_but_new, user_side

ONE = '[[task]]\nid = "a"\nfiles = ["out.txt"]\nrun = "echo done > out.txt"\n'


def _one_line(cp: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    out = cp.stdout + cp.stderr
    assert "Traceback" not in out, out
    assert cp.returncode == code, out
    lines = [line for line in cp.stderr.splitlines() if line.startswith("forge: ")]
    assert len(lines) == 1 and says in lines[0], out


def _nothing_started(repo: Path) -> None:
    if (repo / ".git" / "forge" / "plans" / "p" / "state.json").exists():
        assert statuses(repo) == {"a": "PENDING"}


def test_a_required_filter_that_fails_is_the_candidates_failure(repo: Path, tmp_path: Path) -> None:
    """The user's config has a required filter whose smudge fails; the task that
    applies it to a file cannot be checked out: it is the culprit, the other lands,
    and the next run is not wedged."""
    git(repo, "config", "filter.x.smudge", "false")
    git(repo, "config", "filter.x.clean", "cat")
    git(repo, "config", "filter.x.required", "true")
    plan = write_plan(
        tmp_path,
        'verify = "true"\n'
        '[[task]]\nid = "a"\nfiles = [".gitattributes", "a.dat"]\n'
        "run = \"echo '*.dat filter=x' > .gitattributes; echo d > a.dat\"\n"
        '[[task]]\nid = "b"\nfiles = ["b.txt"]\nrun = "echo b > b.txt"\n',
    )
    before = user_side(repo)
    cp = plan_and_run(repo, plan)
    out = cp.stdout + cp.stderr
    assert "Traceback" not in out, out
    assert cp.returncode == 5, out
    assert statuses(repo) == {"a": "FAILED", "b": "MERGED"}, out
    assert "could not check the commit out" in out and "smudge filter x failed" in out, out
    again = run_forge(repo, "run")
    assert again.returncode == 5, again.stdout + again.stderr
    assert unchanged_but_new(before, user_side(repo)) == comparable(before)


def test_an_attempt_that_cannot_start_stops_the_run_in_one_line(repo: Path, tmp_path: Path) -> None:
    """The plan's logs folder is a file: no attempt can start, and the run says so
    once instead of starting the task again at full speed forever."""
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    logs = repo / ".git" / "forge" / "plans" / "p" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    logs.rmdir()
    logs.write_text("not a folder\n")
    t0 = time.monotonic()
    cp = run_forge(repo, "run", timeout=60)
    assert time.monotonic() - t0 < 30
    _one_line(cp, 2, "cannot start an attempt of a")
    assert (cp.stdout + cp.stderr).count("a: started") <= 1, cp.stdout
    assert statuses(repo) == {"a": "PENDING"}


def test_a_full_stdout_is_one_line_and_the_commands_own_code(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    for args in (["status"], ["status", "--json"], ["run"]):
        with open("/dev/full", "w") as full:
            cp = subprocess.run(
                forge_cmd(*args),
                cwd=repo,
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
        assert "Traceback" not in cp.stderr, cp.stderr
        assert cp.returncode == 0, cp.stderr
        assert cp.stderr.count("forge: cannot write to standard output") == 1, cp.stderr
    assert statuses(repo) == {"a": "MERGED"}


@pytest.mark.parametrize(
    "nesting", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000]
)
def test_a_deeply_nested_state_file_is_one_line(repo: Path, tmp_path: Path, nesting: str) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    (repo / ".git" / "forge" / "plans" / "p" / "state.json").write_text(nesting)
    for args in (["status"], ["run"]):
        _one_line(run_forge(repo, *args), 2, "is corrupt (nested too deep)")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("log_cap = inf\n", "`log_cap`: expected a size"),
        ("log_cap = nan\n", "`log_cap`: expected a size"),
        ("budget = nan\n", "`budget`: a budget must be a finite amount"),
        ("budget = inf\n", "`budget`: a budget must be a finite amount"),
        ("x = " + "[" * 50_000 + "]" * 50_000 + "\n", "TOML nested too deep"),
        (
            '[[task]]\nid = "b"\nfiles = ["b"]\nrun = "echo \\u0000 > b"\n',
            "`task[2].run` holds a NUL",
        ),
    ],
)
def test_a_plan_value_nothing_can_use_is_one_line(
    repo: Path, tmp_path: Path, line: str, says: str
) -> None:
    plan = write_plan(tmp_path, line + ONE if not line.startswith("[[") else ONE + line)
    _one_line(run_forge(repo, "plan", str(plan)), 2, says)
    assert not (repo / ".git" / "forge" / "plans" / "p").exists()


def test_a_budget_flag_of_nan_is_one_line(repo: Path, tmp_path: Path) -> None:
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    _one_line(run_forge(repo, "run", "--budget", "nan"), 2, "budget")
    _nothing_started(repo)


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("FORGE_LOG_CAP", "inf", "FORGE_LOG_CAP='inf'"),
        ("FORGE_LOG_CAP", "12x", "FORGE_LOG_CAP='12x'"),
        ("FORGE_GRACE", "soon", "FORGE_GRACE='soon'"),
        ("FORGE_INFRA_BACKOFF", "nan", "FORGE_INFRA_BACKOFF='nan'"),
        ("FORGE_WORKTREES", "{file}", "is not a folder"),
    ],
)
def test_every_forge_variable_is_checked_at_start(
    repo: Path, tmp_path: Path, var: str, value: str, says: str
) -> None:
    """A bad value is one line before anything starts, not every attempt spent."""
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    (tmp_path / "a-file").write_text("")
    env = {**os.environ, var: value.format(file=tmp_path / "a-file")}
    cp = subprocess.run(
        forge_cmd("run"),
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    _one_line(cp, 2, says)
    _nothing_started(repo)


def test_a_five_megabyte_run_runs(repo: Path, tmp_path: Path) -> None:
    """One argument is capped at 128 KiB: a long command runs from a file."""
    body = ": " + "x" * 5_000_000 + "\necho done > out.txt"
    plan = write_plan(
        tmp_path, f"[[task]]\nid = \"a\"\nfiles = [\"out.txt\"]\nrun = '''{body}'''\n"
    )
    cp = plan_and_run(repo, plan)
    assert "Traceback" not in cp.stdout + cp.stderr
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"a": "MERGED"}


def test_a_private_tmp_left_by_a_killed_forge_is_removed_at_the_next_run(
    repo: Path, tmp_path: Path
) -> None:
    """A sandbox's private /tmp (or a long command's script folder) outlives a
    `kill -9` of forge; the next run removes it, and leaves a live process's alone."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = tmp / "forge-sandbox-999999999-abc"  # above any pid_max: no such process
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "left").write_text("x")
    live = tmp / f"forge-command-{os.getpid()}-abc"
    live.mkdir()
    assert run_forge(repo, "plan", str(write_plan(tmp_path, ONE))).returncode == 0
    cp = subprocess.run(
        forge_cmd("run"),
        cwd=repo,
        env={**os.environ, "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert not dead.exists()
    assert live.exists()
