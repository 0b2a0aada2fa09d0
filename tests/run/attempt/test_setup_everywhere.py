"""A `setup` that fails in every slot is the plan's problem: said as such, with its
meaningful line, nothing verified that no task changed, and a next step that fixes
it; a failed shell task is fixed in the plan, not retried with feedback."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from helpers.gitkit import run_forge
from helpers.runkit import statuses, write_plan

BROKEN = "echo installing; echo 'ERROR: No matching distribution found for nosuchpkg' >&2; exit 1"


def _body(setup: str, counter: Path, command: str = "echo a > a.txt") -> str:
    return (
        f"setup = {setup!r}\nverify = 'echo x >> {counter}'\n"
        f'[[task]]\nid = "a"\nrun = "{command}"\nfiles = ["a.txt"]\n'
        '[[task]]\nid = "b"\nrun = "echo b > b.txt"\nfiles = ["b.txt"]\n'
    )


def _suggested(out: str) -> list[str]:
    return re.findall(r"`(forge [^`]*)`", out)


def test_setup_failing_everywhere_names_the_plan_and_verifies_nothing(
    repo: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "verifications"
    plan = write_plan(tmp_path, _body(BROKEN, counter))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "run", "p")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    assert (
        "setup failed in every slot: ERROR: No matching distribution found for nosuchpkg; "
        f"fix setup in {plan} and run again: `forge plan {plan}`, then "
        "`forge run p --retry-failed 1`" in cp.stdout
    ), cp.stdout
    assert not counter.exists(), "the untouched base was verified"
    assert "verification: FAIL" not in cp.stdout and "forge retry" not in cp.stdout
    # the suggestion, followed once setup is fixed, lands the plan
    plan.write_text(plan.read_text().replace(repr(BROKEN), "'true'"))
    for command in _suggested(cp.stdout.split("setup failed in every slot")[1].splitlines()[0]):
        last = run_forge(repo, *shlex.split(command)[1:])
        assert last.returncode == 0, (command, last.stdout, last.stderr)
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
    assert counter.exists()


def test_a_failed_shell_task_is_fixed_in_the_plan(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "verifications"
    plan = write_plan(tmp_path, _body("true", counter, command="exit 3"))
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "run", "p")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    line = next(ln for ln in cp.stdout.splitlines() if ln.startswith("next: a is a shell"))
    assert line == (
        f"next: a is a shell command: fix its `run` in {plan}, then `forge plan {plan}` and "
        "`forge retry a --plan p --fresh`"
    )
    plan.write_text(plan.read_text().replace("exit 3", "echo a > a.txt"))
    for command in _suggested(line):
        last = run_forge(repo, *shlex.split(command)[1:])
        assert last.returncode == 0, (command, last.stdout, last.stderr)
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED"}
