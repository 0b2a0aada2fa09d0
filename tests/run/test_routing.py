"""`agent = "auto"`: choices from the pool, recorded with their probabilities."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, run_forge
from helpers.runkit import plan_and_run, write_plan

from forge.agents.prices import DEFAULT_PRICES
from forge.run.records.routing import Arm, cheapest, pick, probabilities

POOL = ["cheap:gpt-5-nano", "dear:opus"]


def _body(n: int, *, pool: bool = True) -> str:
    argv = json.dumps([sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt"])
    body = 'max_parallel = 1\nagent = "auto"\n'
    body += f"auto = {json.dumps(POOL)}\n" if pool else ""
    body += f'[agents.cheap]\ncommand = {argv}\nmodels = ["gpt-5-nano"]\n'
    body += f'[agents.dear]\ncommand = {argv}\nmodels = ["opus"]\n'
    for i in range(n):
        body += f'[[task]]\nid = "t{i}"\nprompt = "edit"\nfiles = ["t{i}.txt"]\n'
    return body


def test_auto_choices_are_recorded_with_their_probability(repo: Path, tmp_path: Path) -> None:
    cp = plan_and_run(repo, write_plan(tmp_path, _body(3)))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    first = json.loads(run_forge(repo, "status", "t0", "--json").stdout)["history"][0]
    # No history yet: the cheapest spec of the pool, chosen without randomness.
    assert first["agent"] == "cheap:gpt-5-nano"
    assert first["propensity"] == 1.0 and first["chosen_from"] == POOL
    for tid in ("t1", "t2"):
        (attempt,) = json.loads(run_forge(repo, "status", tid, "--json").stdout)["history"]
        assert attempt["agent"] in POOL
        assert 0 < attempt["propensity"] <= 1 and attempt["chosen_from"] == POOL
    rows = json.loads(run_forge(repo, "stats", "--json").stdout)["rows"]
    assert sum(r["landed"] for r in rows) == 3


def test_auto_without_a_pool_is_a_plan_error(repo: Path, tmp_path: Path) -> None:
    cp = run_forge(repo, "plan", str(write_plan(tmp_path, _body(1, pool=False))))
    assert cp.returncode == 2 and 'agent "auto" needs a pool' in cp.stderr


def test_a_pool_in_forge_toml_serves_a_plan_without_one(repo: Path, tmp_path: Path) -> None:
    (repo / "forge.toml").write_text(f"auto = {json.dumps(POOL)}\n")
    cp = plan_and_run(repo, write_plan(tmp_path, _body(1, pool=False)))
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_thompson_prefers_what_lands_cheaply() -> None:
    rng = random.Random(7)
    good = Arm("cheap:gpt-5-nano", tried=40, landed=36, cost=0.01)
    bad = Arm("dear:opus", tried=40, landed=38, cost=0.5)
    probs = probabilities([good, bad], DEFAULT_PRICES, rng)
    assert probs[0] > 0.95 and abs(sum(probs) - 1) < 1e-9
    # A cheap spec that never lands loses to a dear one that does.
    never = Arm("cheap:gpt-5-nano", tried=40, landed=0, cost=0.05)
    assert pick([never, bad], DEFAULT_PRICES, rng)[0] == "dear:opus"
    assert cheapest(["dear:opus", "cheap:gpt-5-nano"], DEFAULT_PRICES) == "cheap:gpt-5-nano"
    assert pick([Arm("dear:opus")], DEFAULT_PRICES, rng) == ("dear:opus", 1.0)


def test_a_chosen_spec_still_escalates_after_failures(repo: Path, tmp_path: Path) -> None:
    need = json.dumps([sys.executable, str(FAKES / "agent_need_model.py"), "large", "t.txt"])
    body = 'agent = "auto"\nauto = ["need:small"]\nescalate_after = 1\n'
    body += f'[agents.need]\ncommand = {need}\nmodels = ["small", "large"]\n'
    body += '[[task]]\nid = "t"\nprompt = "edit"\nfiles = ["t.txt"]\n'
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--retry-failed", "1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    history = json.loads(run_forge(repo, "status", "t", "--json").stdout)["history"]
    assert [a["agent"] for a in history] == ["need:small", "need:large"]
    # Only the first was a choice (from a pool of one: no randomness).
    assert history[0]["propensity"] == 1.0 and history[1]["propensity"] is None


@pytest.mark.slow
def test_an_agent_that_only_ever_failed_on_its_provider_is_not_chosen_again(
    repo: Path, tmp_path: Path
) -> None:
    # `bad` is the cheapest of the pool, and its CLI is not logged in.
    bad = json.dumps([sys.executable, str(FAKES / "agent_fail.py"), "Not logged in"])
    good = json.dumps([sys.executable, str(FAKES / "agent_edit.py"), "{task}.txt"])
    (repo / "forge.toml").write_text('[prices]\n"bad" = [0.01, 0.01]\n"good" = [50, 50]\n')
    agents = f"[agents.bad]\ncommand = {bad}\n[agents.good]\ncommand = {good}\n"

    def plan(name: str) -> Path:
        body = f'agent = "auto"\nauto = ["bad", "good"]\n{agents}'
        body += f'[[task]]\nid = "{name}1"\nprompt = "edit"\nfiles = ["{name}1.txt"]\n'
        return write_plan(tmp_path, body, name=name)

    plan_and_run(repo, plan("p"))
    first = json.loads(run_forge(repo, "status", "p1", "--plan", "p", "--json").stdout)
    assert first["history"][0]["agent"] == "bad" and first["history"][0]["status"] == "INFRA"
    # A new run of another plan: `bad` has never run at all; it is not tried again.
    for name in ("q", "r", "s"):
        assert run_forge(repo, "plan", str(plan(name))).returncode == 0
        cp = run_forge(repo, "run", name)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        data = json.loads(run_forge(repo, "status", f"{name}1", "--plan", name, "--json").stdout)
        assert [a["agent"] for a in data["history"]] == ["good"]
        assert data["history"][0]["chosen_from"] == ["good"]
