"""`forge plan` forecasts cost and time from the attempts history, once there is one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.gitkit import FAKES, run_forge
from helpers.runkit import write_plan


def _body(ids: list[str], failing: str = "") -> str:
    argv = json.dumps([sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt", "--usage"])
    fail = json.dumps([sys.executable, str(FAKES / "agent_fail.py")])
    body = f'agent = "fake"\n[agents.fake]\ncommand = {argv}\nusage_format = "claude"\n'
    body += f"[agents.bad]\ncommand = {fail}\n"
    for tid in ids:
        agent = "bad" if tid == failing else "fake"
        body += (
            f'[[task]]\nid = "{tid}"\nprompt = "edit"\nfiles = ["{tid}.txt"]\nagent = "{agent}"\n'
        )
    return body


def test_a_forecast_after_a_first_run(repo: Path, tmp_path: Path) -> None:
    first = run_forge(repo, "plan", str(write_plan(tmp_path, _body(["a"]), name="one")))
    assert first.returncode == 0 and "forecast:" not in first.stdout  # no history: silent
    assert run_forge(repo, "run", "one").returncode == 0
    second = write_plan(tmp_path, _body(["b", "c"]), name="two")
    bad = run_forge(repo, "plan", str(write_plan(tmp_path, _body(["x"], "x"), name="three")))
    assert "forecast: cost unknown" not in bad.stdout
    cp = run_forge(repo, "plan", str(second))
    assert cp.returncode == 0, cp.stderr
    line = next(ln for ln in cp.stdout.splitlines() if ln.startswith("forecast:"))
    assert line.startswith("forecast: ~$0.0") and "for 2 tasks (from 1 attempt)" in line
    data = json.loads(run_forge(repo, "plan", str(second), "--json").stdout)
    assert data["forecast"]["tasks"] == 2 and data["forecast"]["from_attempts"] == 1
    assert data["forecast"]["usd"] > 0 and data["forecast"]["may_bounce"] == []
    # It is advice: the run goes on as planned.
    assert run_forge(repo, "run", "two").returncode == 0
    # A spec that failed before makes its task one that may bounce.
    assert run_forge(repo, "run", "three").returncode == 5
    again = run_forge(repo, "plan", str(write_plan(tmp_path, _body(["y", "z"], "z"), name="four")))
    assert "; may bounce: z" in again.stdout
