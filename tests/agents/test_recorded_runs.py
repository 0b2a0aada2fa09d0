"""The real CLIs' recorded output (tests/fixtures/agents) replayed through `forge
run`: what forge can check of each (the model, the cost, the error) holds."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers.gitkit import FAKES, run_forge
from helpers.runkit import plan_and_run, state, write_plan

from forge.agents.spec import PRESETS, classify_failure
from forge.base import procgroup

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def _replay_plan(tmp_path: Path, spec: str, fixture: str, *flags: str) -> Path:
    """A plan whose one task runs the preset of `spec` with its CLI replaced by a
    replay of `fixture` (the preset's output reading, usage and patterns stay)."""
    name = spec.split(":")[0]
    argv = [sys.executable, str(FAKES / "agent_replay.py"), fixture, *flags]
    body = f'agent = "{spec}"\n[agents.{name}]\ncommand = {json.dumps(argv)}\n'
    body += '[[task]]\nid = "t"\nprompt = "edit"\nfiles = ["t.txt"]\n'
    return write_plan(tmp_path, body)


def _history(repo: Path) -> list[dict[str, object]]:
    data = json.loads(run_forge(repo, "status", "t", "--json").stdout)
    history: list[dict[str, object]] = data["history"]
    return history


def test_claude_replies_name_the_model_that_served_them(repo: Path, tmp_path: Path) -> None:
    # Its init and summary name opus, the model asked for; each reply names sonnet.
    plan = _replay_plan(
        tmp_path, "claude:opus", "claude-swapped-model.jsonl", "--exit", "0", "--touch", "t.txt"
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (attempt,) = _history(repo)
    assert attempt["model_mismatch"] == "asked opus, ran claude-sonnet-4-5-20250929"
    assert "model mismatch: asked opus, ran claude-sonnet-4-5" in cp.stdout + cp.stderr


def test_gemini_is_priced_as_the_model_it_reports(repo: Path, tmp_path: Path) -> None:
    plan = _replay_plan(
        tmp_path, "gemini:flash", "gemini-flash.json", "--exit", "0", "--touch", "t.txt"
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (attempt,) = _history(repo)
    # 12,400 prompt tokens in, 600 + 200 thinking out, at gemini-2.5-flash's price.
    assert attempt["cost_usd"] == pytest.approx((12_400 * 0.3 + 800 * 2.5) / 1e6)
    assert attempt["model_mismatch"] is None


def test_a_price_for_the_reported_gemini_model_is_used(repo: Path, tmp_path: Path) -> None:
    (repo / "forge.toml").write_text('[prices]\n"gemini-2.5-flash" = [1.0, 10.0]\n')
    plan = _replay_plan(
        tmp_path, "gemini:flash", "gemini-flash.json", "--exit", "0", "--touch", "t.txt"
    )
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (attempt,) = _history(repo)
    assert attempt["cost_usd"] == pytest.approx((12_400 * 1.0 + 800 * 10.0) / 1e6)


def test_aiders_400_is_the_reason_not_no_changes(repo: Path, tmp_path: Path) -> None:
    plan = _replay_plan(tmp_path, "aider", "aider-400.log", "--exit", "0")
    cp = plan_and_run(repo, plan)
    assert cp.returncode != 0
    ts = state(repo)["tasks"]["t"]
    assert ts["status"] == "FAILED"
    assert ts["reason"].startswith("agent error: litellm.BadRequestError: OpenAIException")
    assert "string too long" in ts["reason"] and "no changes" not in ts["reason"]


def test_aiders_400_wrapped_at_80_columns_is_quoted_whole(repo: Path, tmp_path: Path) -> None:
    plan = _replay_plan(tmp_path, "aider", "aider-400-wrapped.log", "--exit", "0")
    cp = plan_and_run(repo, plan)
    assert cp.returncode != 0
    assert state(repo)["tasks"]["t"]["reason"] == (
        "agent error: litellm.BadRequestError: OpenAIException - fake400: the request is "
        "malformed in some way the server will not accept (a scripted 400)."
    )


def test_a_small_real_cost_is_not_shown_as_free(repo: Path, tmp_path: Path) -> None:
    plan = _replay_plan(tmp_path, "aider", "aider-success.log", "--exit", "0", "--touch", "t.txt")
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "$0.00015" in cp.stdout and "$0.00 " not in cp.stdout
    assert "$0.00015" in run_forge(repo, "status", "t").stdout
    assert "$0.00015" in run_forge(repo, "stats").stdout


def test_a_codex_reset_keeps_its_seconds() -> None:
    out = (FIXTURES / "codex-usage-limit.jsonl").read_text()
    local = datetime.now().astimezone().tzinfo
    said = datetime(2026, 12, 2, 4, 30, 5, tzinfo=local).timestamp()
    failure = classify_failure(PRESETS["codex"], returncode=1, output=out, now=said, said_at=said)
    assert failure is not None and failure.kind == "quota"
    assert failure.retry_after == pytest.approx(12 * 60 + 14)  # 4:42:19, not 4:42:00
    # Read just after the minute turned (forge's timeout, say): it has passed, so
    # the wait is over; it is not tomorrow's 4:42:19.
    later = datetime(2026, 12, 2, 4, 43, 2, tzinfo=local).timestamp()
    failure = classify_failure(PRESETS["codex"], returncode=1, output=out, now=later, said_at=said)
    assert failure is not None and failure.retry_after == 0.0
    failure = classify_failure(PRESETS["codex"], returncode=1, output=out, now=later)
    assert failure is not None and failure.retry_after == 0.0
    # Said late in the evening for a reset after midnight: the next morning.
    evening = datetime(2026, 12, 1, 23, 50, tzinfo=local).timestamp()
    failure = classify_failure(PRESETS["codex"], returncode=1, output=out, now=evening)
    want = datetime(2026, 12, 1, 23, 50, tzinfo=local) + timedelta(hours=4, minutes=52, seconds=19)
    assert failure is not None
    assert failure.retry_after == pytest.approx(want.timestamp() - evening)


def test_a_printed_retry_delay_counts_from_when_the_cli_printed_it(tmp_path: Path) -> None:
    # Gemini prints a 240 s retry delay and waits it out; forge's timeout stops it
    # and writes its own lines into the log after the CLI's.
    log = tmp_path / "agent.log"
    argv = [sys.executable, str(FAKES / "agent_replay.py"), "gemini-retry-delay.log", "--hang"]
    started = time.time()
    res = procgroup.run_group(procgroup.GroupSpec(argv, cwd=tmp_path, log_path=log, timeout=2.0))
    assert res.timed_out and "forge: timed out after 2s" in log.read_text()
    assert res.last_output is not None and res.last_output < started + 1.9
    now = time.time()
    failure = classify_failure(
        PRESETS["gemini"],
        returncode=None,
        output=log.read_text(),
        now=now,
        said_at=res.last_output,
    )
    assert failure is not None and failure.kind == "rate-limit"
    assert failure.retry_after == pytest.approx(240 - (now - res.last_output))
    assert failure.retry_after is not None and failure.retry_after < 238.5


# The real CLIs' output when their task landed in forge's default sandbox
# (bench/real_clis.py against bench/model_server.py; tests/fixtures/agents/README.md).
LANDED = [
    ("claude", "claude-sandboxed.jsonl", 0.00015, ("claude-sonnet-5",)),
    ("codex", "codex-sandboxed-root.jsonl", (20 * 1.25 + 6 * 10) / 1e6, ()),
    ("codex", "codex-sandboxed-user.jsonl", (20 * 1.25 + 6 * 10) / 1e6, ()),
    ("gemini", "gemini-sandboxed.log", None, ("gemini-3.8-flash",)),
    # Priced as the sonnet it was asked for: it printed tokens, no cost.
    ("aider", "aider-sandboxed-user.log", (844 * 3 + 9 * 15) / 1e6, ()),
]


@pytest.mark.parametrize(("spec", "fixture", "cost", "models"), LANDED)
def test_a_real_clis_landed_run_is_read(
    repo: Path,
    tmp_path: Path,
    spec: str,
    fixture: str,
    cost: float | None,
    models: tuple[str, ...],
) -> None:
    plan = _replay_plan(tmp_path, spec, fixture, "--exit", "0", "--touch", "t.txt")
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert state(repo)["tasks"]["t"]["status"] == "MERGED"
    (attempt,) = _history(repo)
    assert attempt["model_mismatch"] is None and attempt["failures"] == []
    assert tuple(attempt["models"] or ()) == models  # type: ignore[arg-type]
    if cost is None:  # a model the price table does not know: unknown, not free
        assert attempt["cost_usd"] is None
    else:
        assert attempt["cost_usd"] == pytest.approx(cost)
    tokens = (attempt["input_tokens"], attempt["output_tokens"])
    assert tokens == ((844, 9) if spec == "aider" else (20, 6))


@pytest.mark.parametrize(
    "fixture",
    [
        "codex-own-sandbox-root.jsonl",
        "claude-own-sandbox-root.jsonl",
        "claude-own-sandbox-user.jsonl",
    ],
)
def test_a_cli_whose_own_sandbox_could_not_start_changed_nothing(
    repo: Path, tmp_path: Path, fixture: str
) -> None:
    # Recorded in forge's sandbox with the CLI's own on: its shell call failed
    # inside ("bwrap: setting up uid map", "Creating new namespace failed", "Can't
    # mount proc"), told only to the model, and the CLI exits 0. Hence the
    # presets' sandbox_command and root_sandbox_command.
    spec = fixture.split("-")[0]
    plan = _replay_plan(tmp_path, spec, fixture, "--exit", "0")
    cp = plan_and_run(repo, plan)
    assert cp.returncode != 0
    assert state(repo)["tasks"]["t"]["reason"] == "no changes"


def test_a_cli_under_tmp_is_a_missing_binary_in_the_sandbox(repo: Path, tmp_path: Path) -> None:
    # Recorded with Claude Code installed under /tmp: the sandbox's /tmp is its
    # own, so bubblewrap cannot find it (exit 1). Not the task's failure: exit 8.
    plan = _replay_plan(tmp_path, "claude", "claude-under-tmp.log", "--exit", "1")
    cp = plan_and_run(repo, plan)
    assert cp.returncode == 8, cp.stdout + cp.stderr
    task = state(repo)["tasks"]["t"]
    assert task["status"] == "INFRA"
    assert task["reason"] == (
        "binary-missing: bwrap: execvp /tmp/clis/claude: No such file or directory"
    )
