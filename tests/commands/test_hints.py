"""Every command forge suggests runs as written: the `next:`, `see:`, pause, hold and
split lines of real failed, paused and retried runs are collected, and each one is
run through the real CLI; none may be a usage error."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, run_forge
from helpers.runkit import write_plan

PY = shlex.quote(sys.executable)
SUGGESTED = re.compile(r"`(forge [^`]*)`")

FAILING = """
[[task]]
id = "a"
run = "exit 1"
files = ["a.txt"]

[[task]]
id = "b"
run = "echo b > b.txt"
files = ["b.txt"]
deps = ["a"]
"""

EXHAUSTED = f"""
agent = "fake"
escalate_after = 1
[agents.fake]
command = {json.dumps(["bash", "-c", f"{PY} {FAKES}/agent_fail.py nope"])}
models = ["a", "b"]
[[task]]
id = "t"
prompt = "do it"
files = ["x.txt"]
"""

PRICED = f"""
max_parallel = 1
agent = "fake"
budget = "0.01 USD"
[agents.fake]
command = {json.dumps([sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt", "--usage"])}
usage_format = "claude"
[[task]]
id = "t0"
prompt = "edit"
files = ["t0.txt"]
[[task]]
id = "t1"
prompt = "edit"
files = ["t1.txt"]
"""

LIMITED = f"""
agent = "fake"
[agents.fake]
command = {json.dumps([sys.executable, str(FAKES / "agent_ratelimit.py")])}
[[task]]
id = "r"
prompt = "do it"
files = ["r.txt"]
"""

HELD = """
[[task]]
id = "h"
run = "echo h > h.txt"
files = ["h.txt"]
"""


def _out(repo: Path, *args: str, code: int) -> str:
    cp = run_forge(repo, *args)
    assert cp.returncode == code, (args, cp.stdout, cp.stderr)
    return cp.stdout + cp.stderr


@pytest.mark.slow
def test_every_suggested_command_runs_as_written(repo: Path, tmp_path: Path) -> None:
    said: list[str] = []
    plans = (("p", FAILING), ("s", EXHAUSTED), ("c", PRICED), ("r", LIMITED), ("h", HELD))
    for name, body in plans:
        _out(repo, "plan", str(write_plan(tmp_path, body, name=name)), code=0)
    said.append(_out(repo, "run", "p", code=5))  # a failure: next: and see:
    said.append(_out(repo, "retry", "a", "--plan", "p", code=5))  # and again, retried
    said.append(_out(repo, "run", "s", code=5))
    said.append(_out(repo, "retry", "t", "--plan", "s", code=5))
    said.append(_out(repo, "retry", "t", "--plan", "s", code=3))  # the split suggestion
    said.append(_out(repo, "run", "c", code=8))  # paused by its budget
    said.append(_out(repo, "run", "r", "--infra-retries", "0", code=8))  # by a rate limit
    said.append(_out(repo, "hold", "--reason", "freeze", "--plan", "h", code=0))
    said.append(_out(repo, "run", "h", code=8))  # paused by a hold
    text = "\n".join(said)
    for kind in ("next:", "see:", "paused: budget", "paused: infra", "paused: hold", "Split it"):
        assert kind in text, kind
    commands = list(dict.fromkeys(SUGGESTED.findall(text)))
    # the lines a person reads after these runs name at least these
    for expected in (
        "forge status p a",
        "forge retry a --plan p --fresh",  # a shell task: fixed in the plan, not fed back
        "forge retry t --plan s",
        "forge resume --plan h",
        "forge run r",
    ):
        assert expected in commands, commands
    assert any(c.startswith("forge plan ") and c.endswith("s.toml") for c in commands), commands
    for command in commands:
        cp = run_forge(repo, *shlex.split(command)[1:])
        assert cp.returncode != 2 and "Usage:" not in cp.stderr, (command, cp.stderr)


def test_status_takes_plan_then_task(repo: Path, tmp_path: Path) -> None:
    _out(repo, "plan", str(write_plan(tmp_path, FAILING, name="p")), code=0)
    _out(repo, "plan", str(write_plan(tmp_path, HELD, name="h")), code=0)
    _out(repo, "run", "p", code=5)
    out = _out(repo, "status", "p", "a", code=0)
    assert out == _out(repo, "status", "a", "--plan", "p", code=0)
    assert "FAILED" in out
    data = json.loads(run_forge(repo, "status", "p", "a", "--json").stdout)
    assert (data["plan"], data["task"]) == ("p", "a")
    cp = run_forge(repo, "status", "p", "a", "--plan", "h")
    assert cp.returncode == 2 and cp.stderr == "forge: give the plan once: `forge status p a`\n"
    cp = run_forge(repo, "status", "p", "nosuch")
    assert cp.returncode == 2 and "plan 'p' has no task 'nosuch'" in cp.stderr
