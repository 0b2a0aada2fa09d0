"""Capacity: fallback agents while the task's own is paused by INFRA, and
per-agent caps on how many tasks run on an agent at once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, run_forge
from helpers.runkit import plan_and_run, spawn_forge, state, statuses, wait_for, write_plan

from forge.agents.spec import resolve
from forge.errors import ForgeError

PY = sys.executable


def agent(name: str, script: str, extra: str = "") -> str:
    argv = json.dumps(["bash", "-c", script])
    return f'[agents.{name}]\ncommand = {argv}\nmodels = ["small", "large"]\n{extra}'


def task(tid: str, extra: str = "") -> str:
    return f'[[task]]\nid = "{tid}"\nprompt = "do it"\nfiles = ["{tid}.txt"]\n{extra}\n'


RATE_LIMITED = f"{PY} {FAKES}/agent_ratelimit.py"


def edit(name: str = "$FORGE_TASK.txt") -> str:
    return f"{PY} {FAKES}/agent_edit.py {name}"


def test_a_fallback_runs_while_the_agent_backs_off(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long backoff: the task must not wait it out while another agent is free.
    monkeypatch.setenv("FORGE_INFRA_BACKOFF", "300")
    body = (
        'agent = "prim"\nfallback = ["back:large"]\n'
        + agent("prim", RATE_LIMITED)
        + agent("back", edit())
        + task("t")
    )
    plan = write_plan(tmp_path, body)
    assert run_forge(repo, "plan", str(plan)).returncode == 0
    cp = run_forge(repo, "run", timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    tries = state(repo)["tasks"]["t"]["attempts"]
    assert [(a["agent"], a["status"]) for a in tries] == [
        ("prim:small", "INFRA"),
        ("back:large", "MERGED"),
    ]
    assert tries[0]["fallback"] is None
    assert tries[1]["fallback"].startswith("fallback: prim waiting (rate-limit: ")
    history = run_forge(repo, "status", "t").stdout
    assert "back:large [fallback: prim waiting" in history


def test_the_run_pauses_only_when_every_candidate_is_paused(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGE_INFRA_BACKOFF", "0.05")
    body = (
        'agent = "prim"\nfallback = ["back", "gone"]\n'
        + agent("prim", RATE_LIMITED)
        + agent("back", RATE_LIMITED)
        + '[agents.gone]\ncommand = ["no-such-agent-binary"]\n'
        + task("t")
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--infra-retries", "1")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    tries = state(repo)["tasks"]["t"]["attempts"]
    assert {a["agent"].split(":")[0] for a in tries} == {"prim", "back", "gone"}
    assert all(a["status"] == "INFRA" for a in tries)
    paused = state(repo)["paused"]
    assert "prim paused" in paused and "back paused" in paused and "gone paused" in paused
    assert statuses(repo) == {"t": "INFRA"}


def test_a_fallback_keeps_its_own_escalation_streak(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGE_INFRA_BACKOFF", "300")
    fail = f"{PY} {FAKES}/agent_fail.py"
    body = (
        'agent = "prim"\nfallback = ["back"]\nescalate_after = 1\n'
        + agent("prim", RATE_LIMITED)
        + agent("back", f'if [ "$FORGE_MODEL" = large ]; then {edit()}; else {fail}; fi')
        + task("t")
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--retry-failed", "2")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    tries = state(repo)["tasks"]["t"]["attempts"]
    assert [(a["agent"], a["status"]) for a in tries] == [
        ("prim:small", "INFRA"),
        ("back:small", "FAILED"),
        ("back:large", "MERGED"),  # the fallback's own ladder moved up
    ]


def test_max_parallel_caps_tasks_on_one_agent(repo: Path, tmp_path: Path) -> None:
    running, seen, go = tmp_path / "running", tmp_path / "seen", tmp_path / "go"
    running.mkdir()
    go.mkdir()
    # Each run marks itself, notes how many runs it sees, and holds until released.
    script = (
        f"touch {running}/$FORGE_TASK; ls {running} | wc -l >> {seen}; "
        f"while [ ! -e {go}/$FORGE_TASK ]; do sleep 0.01; done; "
        f"rm {running}/$FORGE_TASK; {edit()}"
    )
    body = (
        'agent = "capped"\nmax_parallel = 3\n'
        + agent("capped", script, "max_parallel = 1\n")
        + task("a")
        + task("b")
        + task("c")
    )
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    p = spawn_forge(repo, "run")
    for _ in range(3):
        wait_for(lambda: any(running.iterdir()), what="a task on the agent")
        (held,) = [m.name for m in running.iterdir()]
        # The others wait for the agent: the dispatcher started none of them.
        assert [t for t, s in statuses(repo).items() if s == "RUNNING"] == [held]
        (go / held).touch()

        def released(mark: Path = running / held) -> bool:
            return not mark.exists()

        wait_for(released, what=f"{held} released")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err
    assert statuses(repo) == {"a": "MERGED", "b": "MERGED", "c": "MERGED"}
    assert [int(n) for n in seen.read_text().split()] == [1, 1, 1]


def test_a_preset_takes_a_cap_and_keeps_the_rest() -> None:
    defn, _ = resolve("claude", {"claude": {"max_parallel": 8}})
    assert defn.max_parallel == 8 and defn.command[0] == "claude"
    assert resolve("claude", {})[0].max_parallel is None
    with pytest.raises(ForgeError, match="max_parallel must be a whole number of at least 1"):
        resolve("claude", {"claude": {"max_parallel": 0}})


def test_fallback_and_review_specs_are_checked_by_plan(repo: Path, tmp_path: Path) -> None:
    body = 'fallback = ["nope"]\nreview = "claude:gpt-4"\n' + task("t")
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, body)))
    assert cp.returncode == 2
    assert "fallback agent 'nope'" in cp.stderr and "review agent 'claude:gpt-4'" in cp.stderr
    assert "Traceback" not in cp.stderr
