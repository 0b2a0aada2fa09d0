"""Retries and escalation end to end: fake agents that are tiny scripts."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan

PY = shlex.quote(sys.executable)


def agent(
    name: str,
    command: str,
    *,
    models: str = '["small", "medium", "large"]',
    efforts: str | None = '["low", "medium", "high"]',
) -> str:
    argv = json.dumps(["bash", "-c", command])
    ladder = f"efforts = {efforts}\n" if efforts else ""
    return f"[agents.{name}]\ncommand = {argv}\nmodels = {models}\n{ladder}"


def task(prompt: str = "do it", files: str = '["x.txt"]', extra: str = "") -> str:
    return (
        f'[[task]]\nid = "t"\ntitle = "the task"\nprompt = "{prompt}"\nfiles = {files}\n{extra}\n'
    )


def attempts(repo: Path) -> list[dict[str, object]]:
    result: list[dict[str, object]] = state(repo)["tasks"]["t"]["attempts"]
    return result


def test_escalates_the_model_until_it_passes(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "fake"\nescalate_after = 2\n'
        + agent("fake", f"{PY} {FAKES}/agent_need_model.py large x.txt")
        + task()
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--retry-failed", "4")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    models = [a["model"] for a in attempts(repo)]
    assert models == ["small", "small", "medium", "medium", "large"]
    assert statuses(repo) == {"t": "MERGED"}


def test_escalates_the_effort_at_the_top_of_the_ladder(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "fake"\nescalate_after = 1\nescalate_effort = true\n'
        + agent("fake", f"{PY} {FAKES}/agent_need_effort.py high x.txt", models='["only"]')
        + task()
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--retry-failed", "5")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert [a["effort"] for a in attempts(repo)] == ["low", "medium", "high"]


def test_exhausted_escalation_exits_3_with_a_split_suggestion(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "fake"\nescalate_after = 1\n'
        + agent("fake", f"{PY} {FAKES}/agent_fail.py nope", models='["a", "b"]', efforts=None)
        + task()
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5, cp.stdout + cp.stderr
    cp = run_forge(repo, "retry", "t")
    assert cp.returncode == 5, cp.stdout + cp.stderr
    cp = run_forge(repo, "retry", "t")
    assert cp.returncode == 3, cp.stdout + cp.stderr
    assert "split" in cp.stdout.lower()
    assert [a["model"] for a in attempts(repo)] == ["a", "b"]  # the third was not run
    st = run_forge(repo, "status", "t")
    assert st.returncode == 0 and "split" in st.stdout.lower()
    assert state(repo)["tasks"]["t"]["suggestion"]


@pytest.mark.slow
def test_rate_limit_pauses_without_spending_attempts(repo: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    cmd = (
        f"if [ -f {go} ]; then {PY} {FAKES}/agent_edit.py x.txt; "
        f"else {PY} {FAKES}/agent_ratelimit.py; fi"
    )
    body = 'agent = "fake"\n' + agent("fake", cmd) + task()
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    import os
    import subprocess

    from helpers.gitkit import forge_cmd

    env = {**os.environ, "FORGE_INFRA_BACKOFF": "0.05"}
    cp = subprocess.run(
        forge_cmd("run", "--infra-retries", "2"),
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 8, cp.stdout + cp.stderr
    tries = attempts(repo)
    assert len(tries) == 3 and all(a["status"] == "INFRA" for a in tries)
    assert "rate" in str(tries[0]["reason"]).lower()
    assert statuses(repo) == {"t": "INFRA"}
    status = json.loads(run_forge(repo, "status", "--json").stdout)
    assert status["tasks"][0]["attempts"] == 0  # INFRA spends no attempt
    go.write_text("go")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert statuses(repo) == {"t": "MERGED"}


def test_retry_feeds_the_failure_back(repo: Path, tmp_path: Path) -> None:
    copies = tmp_path / "prompt-$FORGE_ATTEMPT.md"
    body = (
        'agent = "fake"\n'
        + agent("fake", f'{PY} {FAKES}/agent_copy_prompt.py "{copies}" x.txt')
        + task(extra='check = "echo CHECK-SAYS-NO; grep -q twice x.txt"')
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert "check failed" in state(repo)["tasks"]["t"]["reason"]
    cp = run_forge(repo, "retry", "t")
    assert cp.returncode == 5  # the fake never writes "twice": still failing
    first = (tmp_path / "prompt-1.md").read_text()
    second = (tmp_path / "prompt-2.md").read_text()
    assert "do it" in first and "x.txt" in first and "CHECK-SAYS-NO" not in first
    assert "do it" in second and "CHECK-SAYS-NO" in second and "check failed" in second
    assert "x.txt" in second  # the previous diff's summary names the file


def test_retry_failed_merges_a_task_that_fails_once(repo: Path, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    body = (
        'agent = "fake"\n'
        + agent("fake", f"{PY} {FAKES}/agent_flaky.py 1 {counter} x.txt")
        + task()
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--retry-failed", "2")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert [a["status"] for a in attempts(repo)] == ["FAILED", "MERGED"]


def test_identical_retry_is_no_progress(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "fake"\n'
        + agent("fake", f"{PY} {FAKES}/agent_edit.py x.txt same --overwrite")
        + task(extra='check = "false"')
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--retry-failed", "5")
    assert cp.returncode == 5
    tries = attempts(repo)
    # the second attempt changes nothing on top of the first: no automatic third
    assert len(tries) == 2 and tries[1]["reason"] == "no changes"
    cp = run_forge(repo, "retry", "t", "--fresh")
    assert cp.returncode == 5
    assert str(attempts(repo)[-1]["reason"]).startswith("no progress")
    assert [a["stall"] for a in attempts(repo)] == [None, "no-changes", "no-progress"]
    # No progress is an outcome the escalation policy acts on: a later run does not
    # retry it by itself, and `forge retry` still does.
    cp = run_forge(repo, "run", "--retry-failed", "3")
    assert cp.returncode == 5 and len(attempts(repo)) == 3, cp.stdout + cp.stderr
    assert run_forge(repo, "retry", "t").returncode == 5
    assert len(attempts(repo)) == 4


def test_retry_refusals_change_nothing(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "fake"\n'
        + agent("fake", f"{PY} {FAKES}/agent_fail.py")
        + task()
        + '[[task]]\nid = "u"\nrun = "echo u > u.txt"\nfiles = ["u.txt"]\ndeps = ["t"]\n'
        + '[[task]]\nid = "m"\nrun = "echo m > m.txt"\nfiles = ["m.txt"]\n'
    )
    assert plan_and_run(repo, write_plan(tmp_path, body)).returncode == 5
    before = (repo / ".git/forge/plans/p/state.json").read_bytes()
    for args, needle in (
        (("retry", "nope"), "unknown task"),
        (("retry", "m"), "already merged"),
        (("retry", "u"), "depends on 't'"),
        (("retry", "t", "--agent", "fake:huge"), "no model 'huge'"),
    ):
        cp = run_forge(repo, *args)
        assert cp.returncode == 2, (args, cp.stderr)
        assert needle in cp.stderr and "Traceback" not in cp.stderr
    assert (repo / ".git/forge/plans/p/state.json").read_bytes() == before


def test_shell_preset_runs_the_prompt_as_a_script(repo: Path, tmp_path: Path) -> None:
    body = 'agent = "shell"\n' + task(prompt="echo from-shell > x.txt")
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    from helpers.gitkit import git

    assert git(repo, "show", "forge/p-integration:x.txt") == "from-shell"


def test_a_conflicted_task_retries_on_the_new_integration_head(repo: Path, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    body = f"""
max_parallel = 1
[[task]]
id = "b"
run = "echo b >> CHANGELOG.md; test -f {flag}"
files = ["CHANGELOG.md"]

[[task]]
id = "a"
run = "echo a >> CHANGELOG.md"
files = ["CHANGELOG.md"]
"""
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert statuses(repo) == {"b": "FAILED", "a": "MERGED"}
    flag.write_text("")
    cp = run_forge(repo, "retry", "b")
    assert cp.returncode == 0, cp.stdout + cp.stderr  # from the base: no double "b"
    from helpers.gitkit import git

    assert git(repo, "show", "forge/p-integration:CHANGELOG.md").splitlines() == ["a", "b"]
