"""The real CLIs' recorded failures (tests/fixtures/agents) read right."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from forge.agents.output import cli_message, failure_reason, read_log
from forge.agents.prices import DEFAULT_PRICES
from forge.agents.spec import PRESETS, classify_failure
from forge.commands.status import spend_line, task_row
from forge.run.records.spend import spend_of
from forge.run.state.run_state import Attempt, Status, TaskState

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=ZoneInfo("UTC")).timestamp()


def recorded(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("agent", "fixture", "rc", "kind", "says"),
    [
        # Offline: FailedToOpenSocket comes back as a "success" result with is_error.
        ("claude", "claude-offline.json", 1, "network", "Unable to connect to API (FailedToOpenSocket)"),
        # Recorded here: 2.1.197 against a closed port on 127.0.0.1, after 179 s of retries.
        ("claude", "claude-refused.json", 1, "network", "Unable to connect to API (ConnectionRefused)"),
        # A provider 5xx after the CLI's own retries is infrastructure.
        ("claude", "claude-500.json", 1, "server", "API Error: 500"),
        ("codex", "codex-high-demand.jsonl", 1, "server", "currently experiencing high demand"),
        # Gemini's auth exit: the JSON error's message, not the banner before it.
        ("gemini", "gemini-auth.log", 41, "auth", "Please set an Auth method"),
        # A 429 RESOURCE_EXHAUSTED is a rate limit, though it speaks of quota.
        ("gemini", "gemini-429.json", 1, "rate-limit", "RESOURCE_EXHAUSTED"),
        # aider exits 0 after giving up on a 429.
        ("aider", "aider-ratelimit.log", 0, "rate-limit", "The API provider has rate limited you"),
    ],
)  # fmt: skip
def test_recorded_infra_failures(agent: str, fixture: str, rc: int, kind: str, says: str) -> None:
    failure = classify_failure(PRESETS[agent], returncode=rc, output=recorded(fixture), now=NOW)
    assert failure is not None
    assert failure.kind == kind
    assert says in failure.message
    assert "YOLO mode" not in failure.message and "\n" not in failure.message


@pytest.mark.parametrize(
    ("agent", "fixture", "kind", "retry_after"),
    [
        # Codex without a network reconnects until it is killed.
        ("codex", "codex-offline.log", "network", None),
        # Gemini honours a long retryDelay after a 429.
        ("gemini", "gemini-retry-delay.log", "rate-limit", 240.0),
        # Recorded here: Claude Code 2.1.197 (stream-json) retrying a 429 with a
        # Retry-After of 30 s, and retrying with no server to connect to.
        ("claude", "claude-429-retrying.jsonl", "rate-limit", 30.0),
        ("claude", "claude-offline-retrying.jsonl", "network", None),
        # Recorded here: Gemini CLI 0.61.0 retrying a 429 from 127.0.0.1.
        ("gemini", "gemini-429-retrying.log", "rate-limit", None),
    ],
)
def test_recorded_outages_read_after_a_timeout(
    agent: str, fixture: str, kind: str, retry_after: float | None
) -> None:
    # A timed-out run has no exit code of its own.
    failure = classify_failure(PRESETS[agent], returncode=None, output=recorded(fixture), now=NOW)
    assert failure is not None and failure.kind == kind
    assert failure.retry_after == retry_after
    assert "at " not in failure.message[:3]  # the CLI's message, not a stack frame


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("claude-max-turns.json", "Reached the maximum number of turns (30)"),
        (
            "codex-turn-failed.jsonl",
            "tool call failed: apply_patch rejected: file is outside the writable roots",
        ),
        ("codex-high-demand.jsonl", "currently experiencing high demand"),
        ("gemini-auth.log", "Please set an Auth method in your /root/.gemini/settings.json"),
    ],
)
def test_the_reason_is_the_clis_message_not_its_last_line(fixture: str, reason: str) -> None:
    said = failure_reason(recorded(fixture))
    assert said is not None and reason in said
    assert not said.startswith("{")


def test_failure_reason_of_plain_text_is_its_last_line() -> None:
    assert cli_message("Traceback ...\nValueError: bad\n") is None
    assert failure_reason("Traceback ...\nValueError: bad\n") == "ValueError: bad"
    assert failure_reason("") is None


def test_a_log_is_read_into_json_values_events_and_plain_lines() -> None:
    log = read_log('{"type": "result"}\n[1, 2]\n  starting up\n{\n  "error": "x"\n}\n{ not json\n')
    assert log.values == ({"type": "result"}, [1, 2], {"error": "x"})
    assert log.events == ({"type": "result"}, {"error": "x"})
    assert log.plain == ("starting up", "{ not json")


def test_codex_terminal_event_wins_over_its_retry_errors() -> None:
    out = recorded("codex-high-demand.jsonl").replace(
        'turn.failed","error":{"message":"We', 'turn.failed","error":{"message":"Final: We'
    )
    assert (cli_message(out) or "").startswith("Final: ")


def test_the_clis_own_retries_do_not_outweigh_its_result() -> None:
    # A run that retried a 429, recovered and then failed on its own merits.
    out = recorded("claude-429-retrying.jsonl") + recorded("claude-max-turns.json")
    assert classify_failure(PRESETS["claude"], returncode=1, output=out, now=NOW) is None


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        # Codex quotes the provider's body as its message: the JSON is unwrapped.
        (
            "codex-bad-request.jsonl",
            "The 'gpt-9' model is not supported when using Codex with a ChatGPT account.",
        ),
        # Gemini nests the provider's error in its own, after a report path.
        (
            "gemini-400.json",
            "status 400: models/gemini-9-pro is not found for API version v1beta, "
            "or is not supported for generateContent.",
        ),
        # A Node stack trace after the message: the message, not a frame.
        ("gemini-stack.log", "Error: exception TypeError: fetch failed sending request"),
    ],
)
def test_a_reason_is_the_innermost_human_message(fixture: str, reason: str) -> None:
    said = failure_reason(recorded(fixture))
    assert said == reason
    assert "{" not in said and "/tmp/" not in said


def test_a_retry_delay_counts_from_when_it_was_printed() -> None:
    # Printed 200 s before forge read it (the CLI waited until forge's timeout).
    failure = classify_failure(
        PRESETS["gemini"],
        returncode=None,
        output=recorded("gemini-retry-delay.log"),
        now=NOW,
        said_at=NOW - 200,
    )
    assert failure is not None and failure.retry_after == 40.0


def _attempt(agent: str, fixture: str) -> Attempt:
    from forge.agents.spec import parse_usage

    usage = parse_usage(PRESETS[agent.partition(":")[0]], recorded(fixture))
    assert usage is not None
    model = agent.split(":")[1] if ":" in agent else None
    return Attempt(
        number=1,
        agent=agent,
        model=model,
        status=Status.MERGED,
        cost_usd=usage.cost_usd,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
    )


def test_a_codex_run_is_priced_the_same_everywhere() -> None:
    attempt = _attempt("codex:gpt-5.4", "codex-success.jsonl")
    ts = TaskState(id="t", status=Status.MERGED, attempts=[attempt])
    row = task_row(ts, DEFAULT_PRICES)
    spend = spend_of([attempt], DEFAULT_PRICES)
    assert row["cost_usd"] is not None and row["cost_usd"] == round(spend.usd, 6)
    assert spend.describe().startswith(f"${spend.usd:.2f}")


def test_an_unpriced_gemini_run_is_unknown_not_free() -> None:
    attempt = _attempt("gemini:gemini-3-pro-preview", "gemini-success.json")
    ts = TaskState(id="t", status=Status.MERGED, attempts=[attempt])
    assert task_row(ts, DEFAULT_PRICES)["cost_usd"] is None
    spend = spend_of([attempt], DEFAULT_PRICES)
    assert spend.describe() == "unknown for 1 attempt (3.2k in / 60 out tokens)"
    assert "$0.00" not in spend_line(spend.to_dict(), None)
