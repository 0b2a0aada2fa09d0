"""Small things a new user trips on: names that are not there are told precisely,
every mistake of a plan comes at once, a missing agent program is said before the
run, and the plan table fits a terminal."""

from __future__ import annotations

from pathlib import Path

from helpers.gitkit import run_forge
from helpers.runkit import write_plan

ONE = '[[task]]\nid = "{tid}"\nrun = "echo x > {tid}.txt"\nfiles = ["{tid}.txt"]\n'


def _two_plans(repo: Path, tmp_path: Path) -> None:
    for name, tid in (("alpha", "build"), ("beta", "docs")):
        plan = write_plan(tmp_path, ONE.format(tid=tid), name=name)
        assert run_forge(repo, "plan", str(plan)).returncode == 0


def test_a_wrong_plan_or_task_name_is_told_precisely(repo: Path, tmp_path: Path) -> None:
    _two_plans(repo, tmp_path)
    cp = run_forge(repo, "status", "alpah")
    assert cp.returncode == 2
    assert cp.stderr == (
        "forge: no plan or task named 'alpah' (did you mean 'alpha'?) (plans: alpha, beta)\n"
    )
    cp = run_forge(repo, "run", "bta")
    assert cp.returncode == 2
    assert "no plan named 'bta' is recorded (did you mean 'beta'?)" in cp.stderr
    cp = run_forge(repo, "status", "docs")  # a task of exactly one plan: that plan's
    assert cp.returncode == 0, cp.stderr
    assert "docs" in cp.stdout
    cp = run_forge(repo, "status", "beta", "dcs")
    assert cp.returncode == 2
    assert (
        cp.stderr == "forge: plan 'beta' has no task 'dcs' (did you mean 'docs'?) (tasks: docs)\n"
    )
    cp = run_forge(repo, "retry", "biuld")
    assert cp.returncode == 2 and "(did you mean 'build'?)" in cp.stderr


def test_agent_typos_come_with_every_other_mistake(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "claud:sonnet"\n'
        '[[task]]\nid = "a"\nprompt = "x"\nfiles = ["a.txt"]\nagent = "codx"\n'
        '[[task]]\nid = "b"\nprompt = "y"\nfiles = ["b.txt"]\ndep = ["a"]\n'
    )
    plan = write_plan(tmp_path, body)
    cp = run_forge(repo, "plan", str(plan))
    assert cp.returncode == 2
    lines = cp.stderr.splitlines()
    assert len(lines) == 3, cp.stderr
    assert lines[0].startswith(
        f"forge: {plan}:2: agent 'claud:sonnet': unknown agent 'claud' (did you mean 'claude'?): "
        "use one of aider, claude, codex, gemini, shell, or define [agents.claud]"
    )
    assert lines[1].startswith(
        f"forge: {plan}:7: task 'a': agent 'codx': unknown agent 'codx' (did you mean 'codex'?)"
    )
    assert lines[2] == f"forge: {plan}:12: task `b`: unknown key `dep` (did you mean `deps`?)"


def test_plan_warns_of_an_agent_program_that_is_not_there(repo: Path, tmp_path: Path) -> None:
    body = (
        '[agents.mine]\ncommand = ["no-such-agent-program", "{prompt_file}"]\n'
        '[[task]]\nid = "a"\nprompt = "x"\nfiles = ["a.txt"]\nagent = "mine"\n'
    )
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 0, cp.stderr
    assert "forge: warning: agent mine: `no-such-agent-program` not found on PATH" in cp.stderr


def test_the_plan_table_fits_100_columns(repo: Path, tmp_path: Path) -> None:
    body = ""
    for i in range(8):
        deps = ", ".join(f'"a-rather-long-task-name-{j}"' for j in range(i))
        body += (
            f'[[task]]\nid = "a-rather-long-task-name-{i}"\nrun = "true"\n'
            f'files = ["src/module_{i}/file_{i}.py"]\ndeps = [{deps}]\n'
        )
    cp = run_forge(repo, "plan", "--check", str(write_plan(tmp_path, body)))
    assert cp.returncode == 0, cp.stderr
    table = [line for line in cp.stdout.splitlines() if line.strip()][:-1]
    assert max(len(line) for line in table) <= 100, table
    assert sum("a-rather-long-task-name-6" in line for line in table) == 2  # a dep, and itself


def test_the_retry_hint_counts_in_good_grammar(repo: Path, tmp_path: Path) -> None:
    body = "".join(
        f'[[task]]\nid = "{t}"\nrun = "echo {t} > {t}.txt; exit 1"\nfiles = ["{t}.txt"]\n'
        for t in ("x", "y")
    )
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "run")
    assert cp.returncode == 5
    assert "(and 1 more shell task failed)" in cp.stdout, cp.stdout


def test_fresh_says_where_it_starts(repo: Path) -> None:
    cp = run_forge(repo, "retry", "--help")
    assert cp.returncode == 0
    assert "current integration head" in " ".join(cp.stdout.split())
