"""The real CLIs' failures, replayed end to end: presets whose command is a fake
that prints the CLI's recorded output and exits with its real exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, git, run_forge
from helpers.runkit import plan_and_run, state, statuses, write_plan

REPLAY = str(FAKES / "agent_replay.py")


def preset(name: str, *argv: str) -> str:
    """Override only the command of a preset: its patterns and formats stay."""
    return f"[agents.{name}]\ncommand = {json.dumps([sys.executable, *argv])}\n"


def shell_preset(name: str, script: str) -> str:
    return f"[agents.{name}]\ncommand = {json.dumps(['bash', '-c', script])}\n"


TASK = '[[task]]\nid = "t"\ntitle = "the task"\nprompt = "do it"\nfiles = ["x.txt"]\n'


def attempts(repo: Path) -> list[dict[str, object]]:
    result: list[dict[str, object]] = state(repo)["tasks"]["t"]["attempts"]
    return result


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_INFRA_BACKOFF", "0.05")


def test_an_outage_waited_out_until_the_timeout_is_infra(repo: Path, tmp_path: Path) -> None:
    # Codex with no network reconnects until it is killed: not the model's failure.
    body = 'agent = "codex"\ntimeout = "1s"\n' + preset(
        "codex", REPLAY, "codex-offline.log", "--hang"
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body + TASK), "--infra-retries", "0")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert only["status"] == "INFRA"
    assert str(only["reason"]).startswith("network: ") and "timed out after 1s" in str(
        only["reason"]
    )
    assert json.loads(run_forge(repo, "status", "--json").stdout)["tasks"][0]["attempts"] == 0


def test_a_hang_without_an_outage_is_still_a_timeout(repo: Path, tmp_path: Path) -> None:
    body = (
        'agent = "codex"\ntimeout = "1s"\n'
        + preset("codex", REPLAY, "codex-turn-failed.jsonl", "--hang")
        + TASK
    )
    cp = plan_and_run(repo, write_plan(tmp_path, body))
    assert cp.returncode == 5
    assert statuses(repo) == {"t": "TIMEOUT"}


@pytest.mark.parametrize(
    ("agent", "fixture", "rc", "kind"),
    [
        ("claude", "claude-offline.json", "1", "network"),
        ("claude", "claude-500.json", "1", "server"),
        ("codex", "codex-high-demand.jsonl", "1", "server"),
    ],
)
def test_offline_and_server_errors_are_infra(
    repo: Path, tmp_path: Path, agent: str, fixture: str, rc: str, kind: str
) -> None:
    body = f'agent = "{agent}"\n' + preset(agent, REPLAY, fixture, "--exit", rc) + TASK
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--infra-retries", "0")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert only["status"] == "INFRA" and str(only["reason"]).startswith(f"{kind}: ")


def test_the_failed_reason_is_the_clis_message(repo: Path, tmp_path: Path) -> None:
    body = 'agent = "claude"\n' + preset("claude", REPLAY, "claude-max-turns.json", "--exit", "1")
    cp = plan_and_run(repo, write_plan(tmp_path, body + TASK))
    assert cp.returncode == 5
    assert state(repo)["tasks"]["t"]["reason"] == (
        "agent exited 1: Reached the maximum number of turns (30)"
    )
    # `forge status TASK --json`: the attempt count, the attempts, cost and tokens.
    data = json.loads(run_forge(repo, "status", "t", "--json").stdout)
    assert data["task"] == "t" and data["attempts"] == 1 and len(data["history"]) == 1
    assert data["cost_usd"] == pytest.approx(0.4213)
    assert (data["input_tokens"], data["output_tokens"]) == (5120, 880)
    assert data["history"][0]["cost_usd"] == pytest.approx(0.4213)


def test_an_auth_failure_pauses_at_once(repo: Path, tmp_path: Path) -> None:
    # Waiting cannot fix a missing login: no backoff, no retries.
    body = 'agent = "gemini"\n' + preset("gemini", REPLAY, "gemini-auth.log", "--exit", "41")
    cp = plan_and_run(repo, write_plan(tmp_path, body + TASK))
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert str(only["reason"]).startswith("auth: Please set an Auth method")
    assert "YOLO" not in str(only["reason"])
    assert "Please set an Auth method" in str(state(repo)["paused"])


def test_infra_attempts_drop_the_clis_cache_and_do_not_count(repo: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = (
        f"if [ -f {go} ]; then {sys.executable} {FAKES}/agent_edit.py x.txt; "
        f"else {sys.executable} {REPLAY} aider-ratelimit.log --exit 0 "
        "--touch .aider.tags.cache.v4/cache.db; fi"
    )
    body = 'agent = "aider"\n' + shell_preset("aider", script) + TASK
    cp = plan_and_run(repo, write_plan(tmp_path, body), "--infra-retries", "1")
    assert cp.returncode == 8, cp.stdout + cp.stderr
    assert [a["status"] for a in attempts(repo)] == ["INFRA", "INFRA"]
    go.write_text("go")
    cp = run_forge(repo, "run")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # aider's tag cache is never the task's work: nothing was salvaged.
    assert state(repo)["tasks"]["t"]["salvage"] == []
    assert git(repo, "for-each-ref", "refs/forge/salvage") == ""
    # The first real attempt is attempt 1, to the agent and in the history.
    assert git(repo, "show", "forge/p-integration:x.txt") == "edit by t attempt 1"
    history = run_forge(repo, "status", "t").stdout
    rows = [line.split()[:3] for line in history.splitlines()[3:6]]
    assert [(n, status) for n, _, status in rows] == [
        ("-", "INFRA"),
        ("-", "INFRA"),
        ("1", "MERGED"),
    ], history


def test_aider_is_stopped_when_it_starts_retrying_a_rate_limit(repo: Path, tmp_path: Path) -> None:
    # aider would retry the 429 for minutes; forge stops it and backs off instead.
    body = 'agent = "aider"\ntimeout = "10m"\n'
    body += preset("aider", REPLAY, "aider-ratelimit.log", "--hang", "--exit", "0") + TASK
    assert run_forge(repo, "plan", str(write_plan(tmp_path, body))).returncode == 0
    cp = run_forge(repo, "run", "--infra-retries", "0", timeout=60)
    assert cp.returncode == 8, cp.stdout + cp.stderr
    [only] = attempts(repo)
    assert only["status"] == "INFRA"
    assert str(only["reason"]) == (
        "rate-limit: The API provider has rate limited you. Try again later or check your quotas."
    )
