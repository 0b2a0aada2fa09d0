"""Small things a user meets at the command line: --version, plain help text, a
mistyped command, JSON failures, plurals, what status says after clean, the time
column, `forge verify` with one plan, the next step after a failure or a retry,
the deferred note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.gitkit import run_forge
from helpers.runkit import plan_and_run, state, write_plan

from forge import __version__

COMMANDS = [
    ["plan"],
    ["run"],
    ["retry"],
    ["verify"],
    ["status"],
    ["accept"],
    ["hold"],
    ["resume"],
    ["clean"],
    ["demo"],
    ["report"],
    ["hooks", "install"],
]


def test_version(repo: Path) -> None:
    cp = run_forge(repo, "--version")
    assert cp.returncode == 0 and cp.stdout == f"forge {__version__}\n"


@pytest.mark.parametrize("typo", [["rnu"], ["hooks", "instal"]])
def test_a_mistyped_command_is_told_the_right_one_once(repo: Path, typo: list[str]) -> None:
    cp = run_forge(repo, *typo)
    assert cp.returncode == 2 and cp.stdout == ""
    wanted = "'run'" if typo == ["rnu"] else "'install'"
    assert cp.stderr.count("Did you mean") == 1 and wanted in cp.stderr, cp.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_help_has_no_escaped_brackets(repo: Path, command: list[str]) -> None:
    cp = run_forge(repo, *command, "--help")
    assert cp.returncode == 0, cp.stderr
    assert "\\[" not in cp.stdout
    if command == ["run"]:
        assert "[default: 0; x>=0]" in cp.stdout and "[x>=1]" in cp.stdout


def test_json_failure_is_json_on_stdout(repo: Path) -> None:
    cp = run_forge(repo, "status", "--json")
    assert cp.returncode == 2
    assert json.loads(cp.stdout) == {
        "error": "no plan recorded; run `forge plan PLAN.toml` first",
        "exit_code": 2,
    }
    assert cp.stderr == "forge: no plan recorded; run `forge plan PLAN.toml` first\n"


FLAKY = """\
max_parallel = 1
[[task]]
id = "a"
run = "if [ -f {flag} ]; then echo ok > a.txt; else touch {flag}; sleep 1; exit 1; fi"
files = ["a.txt"]
"""


def test_status_time_is_the_last_attempts_and_one_slot(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, FLAKY.format(flag=tmp_path / "flag"))
    cp = plan_and_run(repo, plan, "--retry-failed", "1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    attempts = state(repo)["tasks"]["a"]["attempts"]
    assert len(attempts) == 2 and attempts[0]["duration"] >= 1.0 > attempts[1]["duration"]
    row = json.loads(run_forge(repo, "status", "--json").stdout)["tasks"][0]
    assert row["seconds"] == attempts[1]["duration"]
    assert row["total_seconds"] == pytest.approx(attempts[0]["duration"] + attempts[1]["duration"])
    text = run_forge(repo, "status").stdout
    assert "(1 slot, " in text
    history = run_forge(repo, "status", "a").stdout
    assert "2 tries, " in history and " in all" in history


def test_status_after_clean_says_the_branch_is_gone(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'verify = "true"\n' + FLAKY.format(flag=tmp_path / "f"))
    (tmp_path / "f").touch()
    assert plan_and_run(repo, plan).returncode == 0
    assert run_forge(repo, "accept").returncode == 0
    assert run_forge(repo, "clean").returncode == 0  # accepted: the integration branch goes
    text = run_forge(repo, "status").stdout
    assert "None" not in text
    assert "integration forge/p-integration (no such branch now)" in text


def test_verify_uses_the_one_plans_verification(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'verify = "echo plan-verify-ran"\n' + FLAKY.format(flag="x"))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "verify")  # no integration branch yet: HEAD, with the plan's verify
    assert cp.returncode == 0, cp.stderr
    assert "verification PASS" in cp.stdout and "UNVERIFIED" not in cp.stdout


CHAIN = """\
[[task]]
id = "a"
run = "test -f {flag} && echo a > a.txt"
files = ["a.txt"]
[[task]]
id = "b"
run = "echo b > b.txt"
files = ["b.txt"]
deps = ["a"]
"""


def test_next_step_after_a_failure_and_after_a_retry(repo: Path, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    cp = plan_and_run(repo, write_plan(tmp_path, CHAIN.format(flag=flag)))
    assert cp.returncode == 5
    # a shell task: its command is fixed in the plan (no agent reads the feedback)
    assert "next: a is a shell command: fix its `run` in " in cp.stdout
    assert "`forge retry a --plan p --fresh`" in cp.stdout
    assert "`forge report p`" in cp.stdout
    flag.touch()
    cp = run_forge(repo, "retry", "a")
    assert "next: a merged; its dependents (b) wait for `forge run p`" in cp.stdout


def test_deferred_note_names_the_task_that_waits(repo: Path, tmp_path: Path) -> None:
    # `late` is first in the plan, but `early` has the longer critical path, so the
    # scheduler starts `early` first and `late` is the one that waits.
    body = """\
[[task]]
id = "late"
prompt = "x"
files = ["shared.txt"]
[[task]]
id = "early"
prompt = "x"
files = ["shared.txt"]
[[task]]
id = "after"
prompt = "x"
files = ["other.txt"]
deps = ["early"]
"""
    cp = run_forge(repo, "plan", "--check", "--json", str(write_plan(tmp_path, body)))
    assert cp.returncode == 0, cp.stderr
    tasks = {t["id"]: t for t in json.loads(cp.stdout)["tasks"]}
    assert tasks["late"]["deferral"] == "deferred: overlaps `early` on shared.txt"
    assert tasks["early"]["deferral"] is None


def test_top_level_help_lists_commands_in_the_order_of_use_and_cuts_no_line(repo: Path) -> None:
    cp = run_forge(repo, "--help")
    assert cp.returncode == 0, cp.stderr
    commands = cp.stdout.split("Commands:\n", 1)[1]
    assert "..." not in commands
    names = [
        line.split()[0]
        for line in commands.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    ]
    assert names[:4] == ["plan", "draft", "run", "retry"], names
    assert names.index("status") < names.index("accept") < names.index("clean")
    assert "(no AI, no network)" in " ".join(commands.split())
