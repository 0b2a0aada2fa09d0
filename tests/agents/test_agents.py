"""Agents: specs, presets, tables, commands, env, prompt files, output reading, fakes."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from helpers.gitkit import FAKES

from forge.agents.output import parse_retry_duration
from forge.agents.spec import (
    PRESETS,
    AgentCall,
    AgentDef,
    AgentSpec,
    Feedback,
    TaskText,
    Usage,
    agent_env,
    check_binary,
    classify_failure,
    is_context_overflow,
    parse_usage,
    render_command,
    resolve,
    write_attempt_file,
    write_prompt_file,
    write_script_file,
)
from forge.base import proc
from forge.errors import ForgeError

PY = sys.executable
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=ZoneInfo("UTC")).timestamp()


def custom(**table: Any) -> AgentDef:
    return AgentDef.from_table("mine", {"command": ["my-agent", "{prompt_file}"], **table})


# --- specs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "model", "effort"),
    [
        ("claude", "claude", None, None),
        ("claude:sonnet", "claude", "sonnet", None),
        ("claude:sonnet:high", "claude", "sonnet", "high"),
        ("claude::high", "claude", None, "high"),
        ("claude:", "claude", None, None),
        (" my-agent.v2:large ", "my-agent.v2", "large", None),
    ],
)
def test_spec_parse(text: str, name: str, model: str | None, effort: str | None) -> None:
    spec = AgentSpec.parse(text)
    assert spec == AgentSpec(name, model, effort)
    assert AgentSpec.parse(str(spec)) == spec


def test_spec_str() -> None:
    assert str(AgentSpec("claude")) == "claude"
    assert str(AgentSpec("claude", "opus")) == "claude:opus"
    assert str(AgentSpec("claude", None, "high")) == "claude::high"
    assert str(AgentSpec("claude", "opus", "high")) == "claude:opus:high"


@pytest.mark.parametrize("text", ["", ":sonnet", "a:b:c:d", "bad name", "-x"])
def test_spec_parse_rejects(text: str) -> None:
    with pytest.raises(ForgeError, match=r"bad agent spec .*name\[:model\[:effort\]\]"):
        AgentSpec.parse(text)


# --- resolve -----------------------------------------------------------------


def test_resolve_fills_preset_defaults() -> None:
    defn, spec = resolve("claude", {})
    assert defn is PRESETS["claude"]
    assert spec == AgentSpec("claude", "sonnet", "medium")
    assert resolve(AgentSpec("claude", None, "high"), {})[1] == AgentSpec(
        "claude", "sonnet", "high"
    )
    assert resolve("gemini:pro", {})[1] == AgentSpec("gemini", "pro", None)
    assert resolve("shell", {})[1] == AgentSpec("shell", None, None)


def test_resolve_unknown_agent_names_the_choices() -> None:
    with pytest.raises(ForgeError) as exc:
        resolve("nope", {"mine": {"command": ["x"]}})
    msg = str(exc.value)
    assert "unknown agent 'nope'" in msg
    for name in ("claude", "codex", "aider", "gemini", "shell", "mine", "[agents.nope]"):
        assert name in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("claude:gpt-4", r"agent claude has no model 'gpt-4': choose one of haiku, sonnet, opus"),
        ("claude:opus:turbo", r"no effort 'turbo': choose one of low, medium, high, xhigh, max"),
        ("gemini:pro:high", r"agent gemini takes no effort \(got 'high'\)"),
        ("shell:big", r"agent shell takes no model"),
    ],
)
def test_resolve_rejects_off_ladder(spec: str, match: str) -> None:
    with pytest.raises(ForgeError, match=match):
        resolve(spec, {})


def test_resolve_custom_table_defaults_to_weakest() -> None:
    table = {
        "command": ["my-agent", "--model", "{model}", "--effort", "{effort}", "{prompt_file}"],
        "models": ["small", "medium", "large"],
        "efforts": ["low", "high"],
        "timeout": "30m",
    }
    defn, spec = resolve("mine", {"mine": table})
    assert spec == AgentSpec("mine", "small", "low")
    assert defn.timeout == 1800
    assert resolve("mine:large:high", {"mine": table})[1] == AgentSpec("mine", "large", "high")
    with pytest.raises(ForgeError, match="choose one of small, medium, large"):
        resolve("mine:huge", {"mine": table})


def test_table_named_like_a_preset_overrides_only_its_keys() -> None:
    defn, spec = resolve("claude:claude-opus-4-5", {"claude": {"models": ["claude-opus-4-5"]}})
    assert defn.command == PRESETS["claude"].command
    assert defn.prompt_on_stdin
    assert defn.models == ("claude-opus-4-5",)
    # The preset's default (sonnet) is not on the new ladder, so the weakest rung is.
    assert resolve("claude", {"claude": {"models": ["a", "b"]}})[1].model == "a"
    assert spec.effort == "medium"
    defn, _ = resolve("codex", {"codex": {"command": ["codex", "exec", "-m", "{model}", "-"]}})
    assert defn.command[-1] == "-" and defn.usage_format == "codex"


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({}, r"needs command"),
        ({"command": "my-agent {prompt_file}"}, r"command must be a list of non-empty strings"),
        ({"command": []}, r"command must be a non-empty list"),
        ({"command": ["x", "{model}"]}, r"command uses \{model\} but models is empty"),
        ({"command": ["x", "{effort}"]}, r"command uses \{effort\} but efforts is empty"),
        ({"command": ["x", "{prompt}"]}, r"unknown placeholder \{prompt\}"),
        ({"command": ["x"], "env": {"A": "{nope}"}}, r"env: unknown placeholder \{nope\}"),
        ({"command": ["x"], "models": ["a", "a"]}, r"models must be a list without repeats"),
        ({"command": ["x"], "models": "a"}, r"models must be a list"),
        (
            {"command": ["x"], "models": ["a"], "default_model": "b"},
            r"default_model 'b' is not in models",
        ),
        ({"command": ["x"], "timeout": "soon"}, r"timeout must be a duration"),
        ({"command": ["x"], "timeout": 0}, r"timeout must be a duration"),
        ({"command": ["x"], "usage_format": "xml"}, r"usage_format must be one of"),
        ({"command": ["x"], "infra_patterns": {"slow": "x"}}, r"unknown kind 'slow'"),
        ({"command": ["x"], "infra_patterns": {"quota": "("}}, r"infra_patterns.quota: bad regex"),
        ({"command": ["x"], "infra_exit_codes": {"auth": "41"}}, r"infra_exit_codes.auth must be"),
        ({"command": ["x"], "prompt_on_stdin": "yes"}, r"prompt_on_stdin must be true or false"),
        ({"command": ["x"], "env": {"A": 1}}, r"env must be a table of strings"),
        ({"command": ["x"], "modle": ["a"]}, r"unknown key modle"),
    ],
)
def test_from_table_rejects(table: dict[str, Any], match: str) -> None:
    with pytest.raises(ForgeError, match=match) as exc:
        AgentDef.from_table("x", table)
    assert str(exc.value).startswith("[agents.x]: ")
    assert "\n" not in str(exc.value)


def test_from_table_reports_every_problem_at_once() -> None:
    with pytest.raises(ForgeError) as exc:
        AgentDef.from_table("x", {"command": ["x", "{bad}"], "timeout": "soon", "extra": 1})
    msg = str(exc.value)
    assert "{bad}" in msg and "timeout" in msg and "extra" in msg


def test_from_table_accepts_every_key() -> None:
    defn = AgentDef.from_table(
        "x",
        {
            "command": ["x", "--m", "{model}", "{task}", "{worktree}"],
            "models": ["a", "b"],
            "efforts": ["lo", "hi"],
            "default_model": "b",
            "default_effort": "hi",
            "prompt_on_stdin": True,
            "env": {"X_HOME": "{state_dir}/x"},
            "infra_patterns": {"rate-limit": "SLOW DOWN", "auth": ["who are you", "go away"]},
            "infra_exit_codes": {"auth": 9, "quota": [10, 11]},
            "infra_on_success": True,
            "usage_format": "claude",
            "ignore_paths": [".x-cache"],
            "timeout": 90,
            "stop_on_infra": True,
            "max_parallel": 4,
        },
    )
    assert defn.stop_on_infra and defn.max_parallel == 4
    assert defn.infra_patterns == (
        ("rate-limit", ("SLOW DOWN",)),
        ("auth", ("who are you", "go away")),
    )
    assert defn.infra_exit_codes == (("auth", (9,)), ("quota", (10, 11)))
    assert (defn.default_model, defn.default_effort, defn.timeout) == ("b", "hi", 90.0)
    hash(defn)  # frozen and hashable: usable as a cache key


# --- commands ----------------------------------------------------------------


def _render(
    name: str, spec: str | None = None, tmp: Path = Path("/tmp/t")
) -> tuple[list[str], Path | None]:
    defn, s = resolve(spec or name, {})
    return render_command(defn, s, prompt_file=tmp / "p.md", task="t1", worktree=tmp / "wt")


def test_render_claude() -> None:
    argv, stdin = _render("claude", "claude:opus:high")
    assert argv == [
        "claude", "-p", "--permission-mode", "bypassPermissions", "--output-format", "stream-json", "--verbose",
        "--model", "opus", "--effort", "high",
    ]  # fmt: skip
    assert stdin == Path("/tmp/t/p.md")


def test_render_codex() -> None:
    argv, stdin = _render("codex", "codex::high")
    assert argv[:3] == ["codex", "exec", "--json"]
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("-m") + 1] == "gpt-5.4"
    assert 'model_reasoning_effort="high"' in argv
    assert argv[-1] == "-"  # prompt on stdin, then EOF: never waits for more input
    assert stdin == Path("/tmp/t/p.md")


def test_render_aider() -> None:
    argv, stdin = _render("aider", "aider:opus:low")
    assert argv[0] == "aider" and stdin is None
    assert argv[argv.index("--message-file") + 1] == "/tmp/t/p.md"
    assert argv[argv.index("--model") + 1] == "opus"
    assert argv[argv.index("--reasoning-effort") + 1] == "low"
    for flag in (
        "--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore",
        "--analytics-disable", "--no-check-update",
    ):  # fmt: skip
        assert flag in argv
    assert PRESETS["aider"].infra_on_success
    assert PRESETS["aider"].ignore_paths == (".aider*",)


def test_render_gemini() -> None:
    argv, stdin = _render("gemini", "gemini:pro")
    assert argv[0] == "gemini"
    for flag in ("--approval-mode=yolo", "--skip-trust", "-p"):
        assert flag in argv
    assert argv[argv.index("-o") + 1] == "json"
    assert argv[argv.index("-m") + 1] == "pro"
    assert stdin == Path("/tmp/t/p.md")


def test_render_shell() -> None:
    argv, stdin = _render("shell")
    assert argv == ["bash", "/tmp/t/p.md"] and stdin is None
    assert PRESETS["shell"].script


def test_render_custom_placeholders(tmp_path: Path) -> None:
    defn = AgentDef.from_table(
        "mine", {"command": ["run", "--in={worktree}", "{task}", "-f", "{prompt_file}"]}
    )
    argv, stdin = render_command(
        defn, AgentSpec("mine"), prompt_file=tmp_path / "p.md", task="t9", worktree=tmp_path
    )
    assert argv == ["run", f"--in={tmp_path}", "t9", "-f", str(tmp_path / "p.md")]
    assert stdin is None
    with pytest.raises(ValueError, match="absolute"):
        render_command(
            defn, AgentSpec("mine"), prompt_file=Path("p.md"), task="t", worktree=tmp_path
        )


def test_render_refuses_a_missing_model() -> None:
    with pytest.raises(ForgeError, match=r"uses \{model\} but the spec sets no model"):
        render_command(
            PRESETS["claude"],
            AgentSpec("claude"),
            prompt_file=Path("/p"),
            task="t",
            worktree=Path("/w"),
        )


def test_every_preset_says_which_version_it_follows() -> None:
    assert set(PRESETS) == {"claude", "codex", "aider", "gemini", "shell"}
    assert all(d.written_for for d in PRESETS.values())


# --- env ---------------------------------------------------------------------


def _env(name: str, tmp_path: Path, **kw: Any) -> dict[str, str]:
    defn, spec = resolve(name, {})
    args: dict[str, Any] = {
        "task": "t1",
        "attempt": 1,
        "prompt_file": tmp_path / "p.md",
        "state_dir": tmp_path / "state",
    }
    environ, as_root = kw.pop("environ", {}), kw.pop("as_root", False)
    args.update(kw)
    return agent_env(defn, spec, AgentCall(**args), environ=environ, as_root=as_root)


def test_env_basics(tmp_path: Path) -> None:
    env = _env("claude:opus:high", tmp_path, worktree=tmp_path / "wt")
    assert env["FORGE_TASK"] == "t1"
    assert env["FORGE_ATTEMPT"] == "1"
    assert env["FORGE_PROMPT_FILE"] == str(tmp_path / "p.md")
    assert (env["FORGE_MODEL"], env["FORGE_EFFORT"]) == ("opus", "high")
    assert env["FORGE_WORKTREE"] == str(tmp_path / "wt")
    assert "FORGE_FEEDBACK_FILE" not in env  # only on retries
    assert env["DISABLE_AUTOUPDATER"] == "1"
    retry = _env("claude", tmp_path, attempt=2, feedback_file=tmp_path / "fb.md")
    assert retry["FORGE_FEEDBACK_FILE"] == str(tmp_path / "fb.md")
    assert retry["FORGE_ATTEMPT"] == "2"
    shell = _env("shell", tmp_path)
    assert (shell["FORGE_MODEL"], shell["FORGE_EFFORT"]) == ("", "")


def test_env_is_sandbox_only_as_root(tmp_path: Path) -> None:
    assert "IS_SANDBOX" not in _env("claude", tmp_path, as_root=False)
    assert _env("claude", tmp_path, as_root=True)["IS_SANDBOX"] == "1"
    assert "IS_SANDBOX" not in _env("codex", tmp_path, as_root=True)


@pytest.mark.parametrize(
    ("name", "var", "key"),
    [
        ("claude", "CLAUDE_CONFIG_DIR", "ANTHROPIC_API_KEY"),
        ("claude", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_OAUTH_TOKEN"),
        ("codex", "CODEX_HOME", "CODEX_API_KEY"),
        ("gemini", "GEMINI_CLI_HOME", "GEMINI_API_KEY"),
    ],
)
def test_env_isolates_state_only_with_an_api_key(
    tmp_path: Path, name: str, var: str, key: str
) -> None:
    # Without a key the login lives in the user's config dir: keep it.
    assert var not in _env(name, tmp_path)
    env = _env(name, tmp_path, environ={key: "secret"})
    path = Path(env[var])
    assert path.is_dir() and path.is_relative_to(tmp_path / "state" / "t1")
    other = _env(name, tmp_path, task="t2", environ={key: "secret"})
    assert other[var] != env[var]  # a dir per task: parallel runs never share one


def test_env_aider_history_outside_the_worktree(tmp_path: Path) -> None:
    env = _env("aider", tmp_path)
    for var in ("AIDER_CHAT_HISTORY_FILE", "AIDER_INPUT_HISTORY_FILE"):
        path = Path(env[var])
        assert path.is_relative_to(tmp_path / "state" / "t1")
        assert path.parent.is_dir()


def test_env_table_cannot_hide_forge_vars(tmp_path: Path) -> None:
    defn = custom(env={"FORGE_TASK": "lie", "MY_HOME": "{state_dir}/{task}/home/file"})
    call = AgentCall("t1", 3, tmp_path / "p", tmp_path / "s")
    env = agent_env(defn, AgentSpec("mine"), call, environ={}, as_root=False)
    assert env["FORGE_TASK"] == "t1"
    assert env["MY_HOME"] == f"{tmp_path}/s/t1/home/file"
    assert (tmp_path / "s" / "t1" / "home").is_dir()


# --- check_binary ------------------------------------------------------------


def test_check_binary(tmp_path: Path) -> None:
    empty = str(tmp_path / "nobin")
    reason = check_binary(PRESETS["claude"], path=empty)
    assert reason is not None and "`claude` not found on PATH" in reason
    assert "[agents.claude]" in reason
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "claude"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert check_binary(PRESETS["claude"], path=str(bindir)) is None
    assert check_binary(custom(command=[str(FAKES / "agent_edit.py")])) is None
    plain = tmp_path / "plain.txt"
    plain.write_text("")
    assert "not an executable file" in (check_binary(custom(command=[str(plain)])) or "")
    assert check_binary(custom(command=["{worktree}/run.sh"])) is None
    assert check_binary(custom(command=["./run.sh"])) is None  # relative to the worktree


# --- classify_failure: the CLIs' real messages -------------------------------


def _claude_result(text: str, *, is_error: bool = True) -> str:
    return json.dumps(
        {"type": "result", "subtype": "success", "is_error": is_error, "result": text}
    )


def _codex_failed(message: str) -> str:
    return "\n".join(
        [
            json.dumps({"type": "thread.started", "thread_id": "th1"}),
            json.dumps({"type": "turn.started"}),
            json.dumps({"type": "error", "message": message}),
            json.dumps({"type": "turn.failed", "error": {"message": message}}),
        ]
    )


@pytest.mark.parametrize(
    ("agent", "rc", "output", "kind"),
    [
        ("claude", 1, _claude_result("Not logged in · Please run /login"), "auth"),
        ("claude", 1, _claude_result("Invalid API key · Please run /login"), "auth"),
        ("claude", 1, "API Error: 401 Invalid API key · Please run /login", "auth"),
        ("claude", 1, _claude_result("You've hit your session limit · resets 4:20am (Europe/Warsaw)"), "quota"),
        ("claude", 1, "  ⎿  You've hit your weekly limit · resets Mon 12:00am", "quota"),
        ("claude", 1, _claude_result('API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}}'), "rate-limit"),
        ("claude", 1, _claude_result("API Error: 529 overloaded_error"), "rate-limit"),
        ("codex", 1, _codex_failed("You've hit your usage limit. Upgrade to Pro or try again at 3:45 PM."), "quota"),
        ("codex", 1, _codex_failed("Quota exceeded. Check your plan and billing details."), "quota"),
        ("codex", 1, _codex_failed("exceeded retry limit, last status: 429 Too Many Requests"), "rate-limit"),
        ("codex", 1, _codex_failed("stream disconnected before completion: error sending request"), "network"),
        ("codex", 1, _codex_failed("Connection failed: error sending request for url"), "network"),
        ("codex", 1, _codex_failed('unexpected status 401 Unauthorized: {"code": "invalid_api_key"}'), "auth"),
        ("codex", 1, "ERROR: You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Jul 9th, 2026 1:47 AM.", "quota"),
        ("aider", 0, "Aider v0.86\nThe API provider is not able to authenticate you. Check your API key.", "auth"),
        ("aider", 0, "litellm.RateLimitError: ...\nThe API provider has rate limited you. Try again later or check your quotas.\nRetrying in 0.2 seconds...", "rate-limit"),
        ("gemini", 41, "Please set an Auth method in your /root/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA", "auth"),
        ("gemini", 1, "[API Error: Resource has been exhausted (Status: 429)]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method", "rate-limit"),
        # A 429 that a wait fixes is a rate limit, whatever its text says of quota.
        ("gemini", 1, "You exceeded your current quota. Please retry in 56.480131123s.\nSuggested retry after 56s.", "rate-limit"),
        ("gemini", 1, "[API Error: Quota exceeded for quota metric 'Generate Content API requests per day', quotaId: GenerateRequestsPerDayPerProjectPerModel (Status: RESOURCE_EXHAUSTED)]", "quota"),
        ("gemini", 1, "Error: read ECONNRESET\n    at TLSWrap.onStreamRead", "network"),
        ("gemini", 1, json.dumps({"session_id": "s", "error": {"type": "ApiError", "message": "Too Many Requests", "code": 429}}, indent=2), "rate-limit"),
    ],
)  # fmt: skip
def test_classify_real_messages(agent: str, rc: int, output: str, kind: str) -> None:
    failure = classify_failure(PRESETS[agent], returncode=rc, output=output, now=NOW)
    assert failure is not None, output
    assert failure.kind == kind
    assert "\n" not in failure.message and failure.message


@pytest.mark.parametrize(
    ("agent", "rc", "output"),
    [
        # A pass, whatever the agent wrote.
        ("claude", 0, _claude_result("I added a rate limit; usage limit checks pass", is_error=False)),
        # The agent's own words and tool output are not the CLI's error.
        ("claude", 1, _claude_result("Added a rate limit (429 Too Many Requests)", is_error=False)),
        ("claude", 1, json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "You've hit your usage limit"}]}})
         + "\n" + _claude_result("error_max_turns", is_error=True)),
        ("codex", 1, json.dumps({"type": "item.completed", "item": {"type": "command_execution", "aggregated_output": "ECONNREFUSED 429 rate limit"}})
         + "\n" + json.dumps({"type": "turn.failed", "error": {"message": "model refused"}})),
        ("aider", 0, "Tokens: 2.5k sent, 145 received. Cost: $0.01 message, $0.01 session.\nApplied edit to a.py"),
        ("aider", 1, "Traceback (most recent call last):\n  File \"x.py\", line 429, in f\nValueError: bad"),
        # Context overflow: a retry would overflow again, so it is a failure.
        ("claude", 1, _claude_result("Prompt is too long")),
        ("codex", 1, _codex_failed("Codex ran out of room in the model's context window. Start a new thread.")),
        # A script's output is the user's: its 127 is the script's own mistake.
        ("shell", 127, "script.sh: line 3: pytset: command not found"),
        ("shell", 1, "curl: (6) Could not resolve host: example.com; 429 Too Many Requests"),
    ],
)  # fmt: skip
def test_classify_not_infra(agent: str, rc: int, output: str) -> None:
    assert classify_failure(PRESETS[agent], returncode=rc, output=output, now=NOW) is None


AIDER_EDITS_A_RATE_LIMITER = """Aider v0.86.1
Main model: anthropic/claude-sonnet-4 with diff edit format
I'll add a token-bucket rate limiter; it retries on 429 Too Many Requests.

src/ratelimit.py
<<<<<<< SEARCH
=======
class RateLimiter:
    \"\"\"Connection refused? quota exceeded? back off.\"\"\"
>>>>>>> REPLACE

Applied edit to src/client.py
Applied edit to src/ratelimit.py
Tokens: 5.2k sent, 310 received. Cost: $0.02 message, $0.02 session.
"""


def test_exit_0_reads_only_the_clis_own_messages() -> None:
    # aider exits 0 on API errors too, but after a successful run its log is the
    # model's edits: the generic patterns ("rate limit", "429") must not fire.
    aider = PRESETS["aider"]
    assert classify_failure(aider, returncode=0, output=AIDER_EDITS_A_RATE_LIMITER) is None
    own = AIDER_EDITS_A_RATE_LIMITER + "The API provider has rate limited you. Try again later.\n"
    hit = classify_failure(aider, returncode=0, output=own)
    assert hit is not None and hit.kind == "rate-limit"
    # A custom agent reading exit 0 gets only its own patterns; non-zero, the generic ones too.
    mine = custom(infra_on_success=True, infra_patterns={"quota": ["MY CLI: out of credit"]})
    assert classify_failure(mine, returncode=0, output="rate limit reached") is None
    assert classify_failure(mine, returncode=0, output="MY CLI: out of credit") is not None
    failed = classify_failure(mine, returncode=1, output="rate limit reached")
    assert failed is not None and failed.kind == "rate-limit"


@pytest.mark.parametrize(
    ("environ", "isolated"),
    [
        ({"GEMINI_API_KEY": "k"}, True),
        ({"GOOGLE_GENAI_USE_VERTEXAI": "true"}, True),
        ({"GOOGLE_GENAI_USE_VERTEXAI": "True", "GOOGLE_API_KEY": "k"}, True),
        ({"GOOGLE_GENAI_USE_GCA": "true"}, True),
        ({"GOOGLE_API_KEY": "k"}, False),  # an OAuth user's key for other tools
        ({"GOOGLE_GENAI_USE_VERTEXAI": "false"}, False),
        ({"GOOGLE_GENAI_USE_GCA": "false", "GOOGLE_API_KEY": "k"}, False),
        ({"GEMINI_API_KEY": ""}, False),
    ],
)
def test_gemini_isolates_only_for_logins_that_need_no_state(
    environ: dict[str, str], isolated: bool
) -> None:
    assert PRESETS["gemini"].isolates(environ) is isolated


def test_isolate_when_entries() -> None:
    assert custom().isolates({})  # no condition: always
    defn = custom(isolate_env={"X_HOME": "{state_dir}/x"}, isolate_when=["KEY", "MODE=on"])
    assert defn.isolates({"KEY": "1"}) and defn.isolates({"MODE": "ON"})
    assert not defn.isolates({"MODE": "off"}) and not defn.isolates({})


def test_context_overflow_is_recognised() -> None:
    assert is_context_overflow(_claude_result("Prompt is too long"))
    assert is_context_overflow(
        _codex_failed("Codex ran out of room in the model's context window.")
    )
    assert is_context_overflow("Model gpt-4o has hit a token limit!\nInput tokens: ~130k")
    assert not is_context_overflow(_claude_result("done", is_error=False))


def test_classify_missing_binary() -> None:
    spawn = classify_failure(
        PRESETS["claude"], returncode=None, output="", spawn_error="No such file"
    )
    assert spawn is not None and spawn.kind == "binary-missing" and "No such file" in spawn.message
    mine = custom()
    wrapped = classify_failure(
        mine, returncode=127, output="env: 'my-agent': No such file or directory"
    )
    assert wrapped is not None and wrapped.kind == "binary-missing"
    logged = "forge: cannot run `bash`: No such file or directory"
    for defn in (mine, PRESETS["shell"]):
        failure = classify_failure(defn, returncode=127, output=logged)
        assert failure is not None and failure.kind == "binary-missing"
    assert classify_failure(mine, returncode=1, output="command not found") is None


def test_classify_generic_and_custom_patterns() -> None:
    mine = custom()
    generic = classify_failure(
        mine, returncode=1, output="Error: 429 Too Many Requests\nRetry-After: 20"
    )
    assert generic is not None and (generic.kind, generic.retry_after) == ("rate-limit", 20)
    assert classify_failure(mine, returncode=0, output="rate limit exceeded") is None
    slow = custom(infra_patterns={"rate-limit": "SLOW DOWN"}, infra_exit_codes={"auth": [9]})
    failure = classify_failure(slow, returncode=2, output="server says: slow down, retry in 1m30s")
    assert failure is not None and failure.kind == "rate-limit" and failure.retry_after == 90
    auth = classify_failure(slow, returncode=9, output="bye")
    assert auth is not None and auth.kind == "auth" and auth.retry_after is None


def test_retry_after_from_claude_reset_time() -> None:
    out = _claude_result("You've hit your session limit · resets 4:20am (Europe/Warsaw)")
    failure = classify_failure(PRESETS["claude"], returncode=1, output=out, now=NOW)
    assert failure is not None
    warsaw = datetime.fromtimestamp(NOW, ZoneInfo("Europe/Warsaw"))
    want = (warsaw.replace(hour=4, minute=20, second=0) + timedelta(days=1)).timestamp() - NOW
    assert failure.retry_after == pytest.approx(want)
    assert 0 < want < 86400


def test_retry_after_from_claude_weekday() -> None:
    failure = classify_failure(
        PRESETS["claude"],
        returncode=1,
        output="You've hit your weekly limit · resets Mon 12:00am (UTC)",
        now=NOW,
    )  # NOW is a Monday noon: next Monday midnight is 6.5 days away
    assert failure is not None and failure.retry_after == pytest.approx(6.5 * 86400)


def test_retry_after_from_rate_limit_event_epoch() -> None:
    events = [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": NOW + 9999}},
        {"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": NOW + 300, "rateLimitType": "five_hour"}},
        {"type": "result", "subtype": "success", "is_error": True, "result": "You've hit your session limit · resets 5pm"},
    ]  # fmt: skip
    out = "\n".join(json.dumps(e) for e in events)
    failure = classify_failure(PRESETS["claude"], returncode=1, output=out, now=NOW)
    assert failure is not None and failure.kind == "quota" and failure.retry_after == 300
    only_event = "\n".join(json.dumps(e) for e in events[:3])
    failure = classify_failure(PRESETS["claude"], returncode=1, output=only_event, now=NOW)
    assert failure is not None and failure.kind == "rate-limit" and failure.retry_after == 300


def test_retry_after_from_codex_times() -> None:
    local = datetime.fromtimestamp(NOW).astimezone().tzinfo
    out = _codex_failed("You've hit your usage limit. Upgrade to Pro or try again at 3:45 PM.")
    failure = classify_failure(PRESETS["codex"], returncode=1, output=out, now=NOW)
    # Without seconds the reset may be anywhere in the minute: its end is awaited.
    today = datetime.fromtimestamp(NOW, local).replace(hour=15, minute=46, second=0, microsecond=0)
    if today.timestamp() < NOW - 3600:  # (in a zone where it has passed: tomorrow's)
        today += timedelta(days=1)
    assert failure is not None
    assert failure.retry_after == pytest.approx(max(0.0, today.timestamp() - NOW))
    out = "You've hit your usage limit. … or try again at Dec 2nd, 2026 1:47 AM."
    failure = classify_failure(PRESETS["codex"], returncode=1, output=out, now=NOW)
    want = datetime(2026, 12, 2, 1, 48, tzinfo=local).timestamp() - NOW
    assert failure is not None and failure.retry_after == pytest.approx(want)
    raw = 'exceeded retry limit, last status: 429 Too Many Requests {"resets_in_seconds": 1234}'
    failure = classify_failure(PRESETS["codex"], returncode=1, output=raw, now=NOW)
    assert failure is not None and failure.retry_after == 1234


def test_retry_after_from_gemini() -> None:
    out = "[API Error: quota (Status: 429)]\nPlease wait and try again later.\nSuggested retry after 45s."
    failure = classify_failure(PRESETS["gemini"], returncode=1, output=out)
    assert failure is not None and failure.retry_after == 45
    auth = classify_failure(PRESETS["gemini"], returncode=41, output="Suggested retry after 45s.")
    assert auth is not None and auth.kind == "auth" and auth.retry_after is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30), ("56.48s", 56.48), ("560ms", 0.56), ("1m30s", 90), ("2 minutes", 120),
        ("20", 20), ("1h", 3600), ("1d 5h", 104400), ("7m12.5s", 432.5),
    ],
)  # fmt: skip
def test_parse_retry_duration(text: str, seconds: float) -> None:
    assert parse_retry_duration(text) == pytest.approx(seconds)


# --- parse_usage -------------------------------------------------------------


def test_usage_claude_json() -> None:
    out = "warning: something\n" + json.dumps(
        {
            "type": "result", "subtype": "success", "is_error": False, "result": "done",
            "total_cost_usd": 0.0421, "num_turns": 3,
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 200,
                      "cache_read_input_tokens": 3000, "output_tokens": 456},
        }
    )  # fmt: skip
    assert parse_usage(PRESETS["claude"], out) == Usage(0.0421, 3210, 456)
    assert parse_usage(PRESETS["claude"], "not json at all") is None


def test_usage_claude_stream_json_takes_the_result() -> None:
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {"type": "assistant", "message": {"usage": {"input_tokens": 999, "output_tokens": 999}}},
        {"type": "result", "is_error": False, "total_cost_usd": 1, "usage": {"input_tokens": 5, "output_tokens": 6}},
    ]  # fmt: skip
    out = "\n".join(json.dumps(x) for x in lines)
    assert parse_usage(PRESETS["claude"], out) == Usage(1.0, 5, 6)


def test_usage_codex_sums_turns() -> None:
    lines = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.completed", "usage": {"input_tokens": 1000, "cached_input_tokens": 800, "output_tokens": 50}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "{\"usage\": 1}"}},
        {"type": "turn.completed", "usage": {"input_tokens": 2000, "cached_input_tokens": 0, "output_tokens": 70}},
    ]  # fmt: skip
    out = "Reading prompt from stdin...\n" + "\n".join(json.dumps(x) for x in lines)
    assert parse_usage(PRESETS["codex"], out) == Usage(None, 3000, 120)
    assert parse_usage(PRESETS["codex"], json.dumps(lines[0])) is None


def test_usage_gemini_pretty_json() -> None:
    doc = {
        "session_id": "s",
        "response": "done",
        "stats": {
            "models": {
                "gemini-2.5-flash": {"tokens": {"input": 80, "prompt": 100, "candidates": 20, "total": 130, "cached": 20, "thoughts": 10, "tool": 0}},
                "gemini-2.5-flash-lite": {"tokens": {"prompt": 7, "candidates": 3}},
            }
        },
    }  # fmt: skip
    out = "Loaded cached credentials.\n" + json.dumps(doc, indent=2) + "\n"
    assert parse_usage(PRESETS["gemini"], out) == Usage(None, 107, 33)
    stream = json.dumps(
        {"type": "result", "status": "success", "stats": {"input_tokens": 5, "output_tokens": 7}}
    )
    assert parse_usage(PRESETS["gemini"], stream) == Usage(None, 5, 7)


def test_usage_aider_text() -> None:
    out = (
        "Aider v0.86.1\n"
        "Tokens: 2.5k sent, 145 received. Cost: $0.0098 message, $0.0098 session.\n"
        "Applied edit to app.py\n"
        "Tokens: 1.2M sent, 1,024 cache write, 3.1k received. Cost: $3.60 message, $3.61 session.\n"
    )
    assert parse_usage(PRESETS["aider"], out) == Usage(3.61, 2500 + 1_200_000, 145 + 3100)
    assert parse_usage(PRESETS["aider"], "Tokens: 12k sent, 8 received.") == Usage(None, 12000, 8)
    assert parse_usage(PRESETS["aider"], "no report") is None


def test_usage_none_for_shell_and_plain_agents() -> None:
    out = json.dumps({"type": "result", "total_cost_usd": 1, "usage": {}})
    assert parse_usage(PRESETS["shell"], out) is None
    assert parse_usage(custom(), out) is None
    assert parse_usage(custom(usage_format="claude"), out) == Usage(1.0, None, None)


# --- prompt files --------------------------------------------------------------


def _prompt(path: Path, feedback: Feedback | None, attempt: int = 1) -> str:
    task = TaskText(
        plan="health",
        task_id="route",
        title="Expose GET /health",
        prompt="Add the route in src/app/routes.py.",
        files=["src/app/routes.py", "tests/"],
    )
    write_prompt_file(path, task, attempt=attempt, feedback=feedback)
    return path.read_text()


def test_prompt_file_first_attempt(tmp_path: Path) -> None:
    text = _prompt(tmp_path / "a1" / "prompt.md", None)
    for part in (
        "route", "Expose GET /health", "Add the route in src/app/routes.py.", "health",
        "attempt 1", "- `src/app/routes.py`", "- `tests/`", "Change only these files",
    ):  # fmt: skip
        assert part in text
    assert "Last attempt failed" not in text


def test_prompt_file_with_feedback(tmp_path: Path) -> None:
    fb = Feedback(
        status="FAILED",
        reason="check failed: 1 test failed",
        log_tail="E   assert 500 == 200\n```\nFAILED tests/test_routes.py::test_health",
        diff_summary=" src/app/routes.py | 4 ++++\n 1 file changed",
        source="check",
    )
    text = _prompt(tmp_path / "a2" / "prompt.md", fb, attempt=2)
    assert "attempt 2" in text
    failed = text.split("## Last attempt failed", 1)[1]
    for part in (
        "Status: FAILED", "Reason: check failed: 1 test failed", "the task's check",
        "assert 500 == 200", "FAILED tests/test_routes.py::test_health", "src/app/routes.py | 4 ++++",
    ):  # fmt: skip
        assert part in failed
    # The ``` in the log cannot close the block around it.
    assert "````text\nE   assert 500 == 200\n```\nFAILED" in failed
    lane = _prompt(tmp_path / "a3.md", Feedback("FAILED", "lint", "x", "", "verify:lint"), 3)
    assert "verification lane `lint`" in lane and "(empty)" in lane


def test_script_file_is_the_prompt_verbatim(tmp_path: Path) -> None:
    script = "set -e\necho hi >> out.txt"
    path = tmp_path / "attempt-1.sh"
    write_script_file(path, script=script)
    assert path.read_text() == script + "\n"
    task = TaskText("p", "t", "T", script, ["out.txt"])
    fb = Feedback("FAILED", "r", "tail", "diff", "agent")
    write_attempt_file(PRESETS["shell"], tmp_path / "s.sh", task, attempt=2, feedback=fb)
    assert (tmp_path / "s.sh").read_text() == script + "\n"
    write_attempt_file(PRESETS["claude"], tmp_path / "c.md", task, attempt=2, feedback=fb)
    assert "Last attempt failed" in (tmp_path / "c.md").read_text()


# --- fakes, run for real ------------------------------------------------------


def _run_fake(
    name: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> proc.Completed:
    return proc.run([PY, str(FAKES / name), *args], cwd=cwd, env=env, check=False)


def test_fakes_are_executable_scripts() -> None:
    for script in FAKES.glob("agent_*.py"):
        assert os.access(script, os.X_OK), script
        assert script.read_text().startswith("#!/usr/bin/env python3\n"), script


def test_fake_need_model_and_effort_via_agent_env(tmp_path: Path) -> None:
    defn = custom(models=["small", "large"], efforts=["low", "high"])
    for spec, rc in (("mine:small:high", 1), ("mine:large:low", 0)):
        d, s = resolve(
            spec,
            {"mine": {"command": ["x"], "models": ["small", "large"], "efforts": ["low", "high"]}},
        )
        call = AgentCall("t", 1, tmp_path / "p", tmp_path / "s")
        env = agent_env(d, s, call, environ={}, as_root=False)
        assert _run_fake("agent_need_model.py", "large", cwd=tmp_path, env=env).returncode == rc
        assert _run_fake("agent_need_effort.py", "high", cwd=tmp_path, env=env).returncode == 1 - rc
    assert defn.models == ("small", "large")


def test_fake_ratelimit_is_classified(tmp_path: Path) -> None:
    res = _run_fake("agent_ratelimit.py", "--retry-after", "2", cwd=tmp_path)
    failure = classify_failure(custom(), returncode=res.returncode, output=res.stderr + res.stdout)
    assert failure is not None and failure.kind == "rate-limit" and failure.retry_after == 2
    res = _run_fake("agent_ratelimit.py", "--json", cwd=tmp_path)
    failure = classify_failure(PRESETS["claude"], returncode=res.returncode, output=res.stdout)
    assert failure is not None and failure.kind == "rate-limit" and failure.retry_after is None


@pytest.mark.parametrize(
    ("name", "ok"), [("my-agent_2", True), ("a.b", True), ("-x", False), ("a b", False)]
)
def test_one_agent_name_rule_for_specs_and_tables(tmp_path: Path, name: str, ok: bool) -> None:
    from forge.agents.spec import AgentSpec
    from forge.errors import PlanError
    from forge.plan.repo_config import load_repo_config

    (tmp_path / "forge.toml").write_text(f'[agents."{name}"]\ncommand = ["true"]\n')
    if ok:
        assert AgentSpec.parse(f"{name}:m").name == name
        assert name in load_repo_config(tmp_path).agents
        return
    with pytest.raises(ForgeError, match="starts with a letter or digit"):
        AgentSpec.parse(f"{name}:m")
    with pytest.raises(PlanError, match="starts with a letter or digit"):
        load_repo_config(tmp_path)
