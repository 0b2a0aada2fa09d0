"""The built-in agents, written as `[agents.NAME]` tables.

The presets use the very format a user writes in `forge.toml` or a plan, so a
user's `[agents.claude]` table can override any key of a preset (only the keys it
sets) and `forge.agents.definition.AgentDef.from_table` checks both the same way.

CLI versions followed (flags drift fast; each preset names its version in
`written_for`): Claude Code 2.1.x (2.1.240 changelog, field notes on 2.1.251),
Codex CLI 0.151 (`codex exec`), Aider at commit 5dc9490 (0.8x), Gemini CLI at
commit 5411f11 (0.x, headless mode). Model names drift even faster than flags:
override a ladder with `[agents.NAME] models = [...]`.

Keys beyond SPEC's `command`/`models`/`efforts` (all optional, open to users):

- `prompt_on_stdin`: the prompt file is fed on stdin instead of named in argv.
  Prompts can be large; argv is capped (ARG_MAX, and 128 KiB per argument on Linux).
- `script`: the prompt file is the task's prompt verbatim, run as a script.
- `usage_format`: which parser reads cost/tokens from the log
  (`claude`, `codex`, `gemini`, `aider`, `none`).
- `sandbox_command`, `root_sandbox_command`: run instead of `command` when the
  agent runs in forge's sandbox (as root, `root_sandbox_command` first), where
  the CLI's own sandbox cannot start as it would outside. A table that sets
  `command` alone drops the preset's.
- `env`: always set; `root_env`: set only when forge runs as root;
  `isolate_env` + `isolate_when`: per-task state dirs, set only when one of the
  `isolate_when` entries holds: `VAR` (set, not empty) or `VAR=value`
  (see `forge.agents.definition.AgentDef.isolates`).
  Values may use `{state_dir}` and the command placeholders.
- `infra_patterns` / `infra_exit_codes`: per kind (`auth`, `quota`,
  `rate-limit`, `network`, `binary-missing`), what marks an infrastructure
  failure, on top of the generic patterns every agent gets.
- `infra_on_success`: look for infrastructure failures even after exit 0.
- `error_patterns`: lines that are the CLI's own error after an exit 0 (aider's
  `litellm.BadRequestError: ...` for an HTTP 400); a run that changed nothing
  fails with that line as its reason, not a bare "no changes".
- `stop_on_infra`: stop the CLI as soon as its log shows one of its own
  `infra_patterns`, instead of letting it retry for minutes (forge backs off).
- `ignore_paths`: files the CLI leaves in the worktree that are never the
  task's work (globs, relative to the worktree); the runner drops them before
  committing, so they neither count as changes nor break the `files` scope.
- `default_model` / `default_effort`: used when the spec leaves them out
  (else the weakest of each ladder).
"""

from __future__ import annotations

from collections.abc import Container, Mapping


# Claude Code: `-p` is print (headless) mode; bypassPermissions because the agent
# runs unattended in a worktree of its own, and any permission prompt would hang
# or deny. The final `result` event carries `total_cost_usd` and `usage`.
# stream-json (which needs --verbose with -p) rather than json: while the CLI
# retries a 429 or an outage it prints only `api_retry` events, so a run that
# waits until forge's timeout still says why (json prints nothing until the
# end). The prompt goes on stdin (no argv limit).
def _claude(*settings: str) -> list[str]:
    return [
        "claude",
        "-p",
        "--permission-mode",
        "bypassPermissions",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "{model}",
        "--effort",
        "{effort}",
        *(["--settings", *settings] if settings else []),
    ]


CLAUDE: dict[str, object] = {
    "written_for": "Claude Code 2.1.x (checked with 2.1.197)",
    "command": _claude(),
    # Claude Code's own sandbox (off unless its settings turn it on) runs each
    # Bash command under bubblewrap. In forge's, a new /proc cannot be mounted
    # (forge covers /proc/sys): its weaker nested mode binds the one there. As
    # root no namespace can be made at all ("bwrap: Creating new namespace
    # failed"; nested, uid 0 cannot be mapped): off, forge's sandbox holds.
    "sandbox_command": _claude('{"sandbox":{"enableWeakerNestedSandbox":true}}'),
    "root_sandbox_command": _claude('{"sandbox":{"enabled":false}}'),
    "prompt_on_stdin": True,
    "models": ["haiku", "sonnet", "opus"],
    "efforts": ["low", "medium", "high", "xhigh", "max"],
    "default_model": "sonnet",
    "default_effort": "medium",
    "usage_format": "claude",
    "env": {
        # No updater, telemetry or error reports from dozens of parallel runs.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    },
    # As root, bypassPermissions exits 1 ("cannot be used with root/sudo
    # privileges") unless the process declares itself sandboxed. forge runs it
    # in an isolated worktree, and only sets this where it is needed, so a
    # non-root run keeps Claude Code's own guard.
    "root_env": {"IS_SANDBOX": "1"},
    # Parallel runs corrupt the shared ~/.claude.json; a config dir per task
    # avoids it. Only with a key in the environment: a fresh dir holds no login.
    "isolate_env": {"CLAUDE_CONFIG_DIR": "{state_dir}/{task}/claude"},
    "isolate_when": ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
    "infra_patterns": {
        "auth": [
            r"Not logged in",
            r"Invalid API key",
            r"Please run /login",
            r"OAuth token (?:has )?expired",
            r"authentication_error",
        ],
        "quota": [
            r"hit your (?:session|weekly|usage|daily|monthly|opus|sonnet)?\s*limit",
            r"Credit balance is too low",
            r"usage limit reached",
        ],
        "rate-limit": [
            r"rate_limit_error",
            r"API Error: 429",
            r"overloaded_error",
            r"API Error: 529",
        ],
        "network": [
            r"API Error: Connection error",
            r"Request timed out",
            # Offline, 2.1.197: "API Error: Unable to connect to API (FailedToOpenSocket)".
            r"Unable to connect to API",
            r"FailedToOpenSocket",
        ],
        # A 5xx after the CLI's own retries ("API Error: 500 ..."); 529 is above.
        "server": [r"API Error: 5\d\d\b", r"\bapi_error\b"],
    },
}


# Codex: `exec` never asks for approval. workspace-write keeps writes inside the
# worktree (a worktree is a git boundary, not an OS one); `.git` stays
# read-only so the agent cannot commit, which is what forge wants. In a
# container where bubblewrap cannot start, override the command with
# `--dangerously-bypass-approvals-and-sandbox`. The prompt is piped with `-` and
# stdin then closes: with an open non-TTY stdin codex waits for more input.
def _codex(sandbox: str) -> list[str]:
    return [
        "codex",
        "exec",
        "--json",
        "--sandbox",
        sandbox,
        "--skip-git-repo-check",
        "-c",
        "check_for_update_on_startup=false",
        "-c",
        "analytics.enabled=false",
        "-m",
        "{model}",
        "-c",
        'model_reasoning_effort="{effort}"',
        "-",
    ]


CODEX: dict[str, object] = {
    "written_for": "Codex CLI 0.151 (checked with 0.171)",
    "command": _codex("workspace-write"),
    # Codex's sandbox is bubblewrap in a user namespace of its own. Nested in
    # forge's as a user it works; as root it cannot start (a namespace nested in
    # forge's, which holds no capability, may not map uid 0: "bwrap: setting up
    # uid map: Operation not permitted"), each command fails and codex still
    # exits 0, having changed nothing. There forge's sandbox is the only one.
    "root_sandbox_command": _codex("danger-full-access"),
    "prompt_on_stdin": True,
    "models": ["gpt-5.4-mini", "gpt-5.4"],
    "efforts": ["minimal", "low", "medium", "high", "xhigh"],
    "default_model": "gpt-5.4",
    "default_effort": "medium",
    "usage_format": "codex",
    # CODEX_HOME holds SQLite state that parallel runs contend on. exec reads
    # CODEX_API_KEY; without it the login lives in CODEX_HOME and must stay.
    "isolate_env": {"CODEX_HOME": "{state_dir}/{task}/codex"},
    "isolate_when": ["CODEX_API_KEY"],
    "infra_patterns": {
        "auth": [
            r"invalid_api_key",
            r"\b401 Unauthorized\b",
            r"refresh token (?:was already used|has expired|is invalid)",
            r"Please log out and sign in again",
            r"Not logged in",
        ],
        "quota": [r"hit your usage limit", r"Quota exceeded", r"insufficient_quota"],
        "rate-limit": [r"exceeded retry limit, last status: 429", r"\b429 Too Many Requests\b"],
        "network": [
            r"Connection failed",
            r"stream disconnected before completion",
            r"error sending request",
            r"waiting for network",
        ],
        "server": [
            r"currently experiencing high demand",
            r"unexpected status 5\d\d\b",
            r"Internal server error",
        ],
    },
}

# Aider: commits every edit by default; forge commits, so auto and dirty commits
# are off. `--no-gitignore` stops it adding `.aider*` to .gitignore (a change
# outside the task's files); its history files go to the task's state dir.
# `--analytics-disable`: with --yes-always, a sampled analytics opt-in prompt
# would be accepted. Aider exits 0 even when the LLM call failed, hence
# `infra_on_success`.
AIDER: dict[str, object] = {
    "written_for": "aider 0.8x (5dc9490)",
    "command": [
        "aider",
        "--model",
        "{model}",
        "--reasoning-effort",
        "{effort}",
        "--message-file",
        "{prompt_file}",
        "--yes-always",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-gitignore",
        "--analytics-disable",
        "--no-check-update",
        "--no-show-release-notes",
        "--no-pretty",
    ],
    "models": ["haiku", "sonnet", "opus"],
    "efforts": ["low", "medium", "high"],
    "default_model": "sonnet",
    "default_effort": "medium",
    "usage_format": "aider",
    "infra_on_success": True,
    # aider retries a 429 or an outage itself with a doubling delay, 2m11s a run
    # when measured: forge's backoff does the same without holding the slot.
    "stop_on_infra": True,
    "env": {
        "AIDER_CHAT_HISTORY_FILE": "{state_dir}/{task}/aider/chat-history.md",
        "AIDER_INPUT_HISTORY_FILE": "{state_dir}/{task}/aider/input-history",
    },
    # An API error it does not retry (a 400, a 404) is printed as litellm's
    # exception, then aider exits 0 having done nothing.
    "error_patterns": [r"^litellm\.\w*(?:Error|Exception)\b.*"],
    # The repo map's tag cache (`.aider.tags.cache.v4/`) lands in the worktree.
    "ignore_paths": [".aider*"],
    # Aider's own messages (aider/exceptions.py), word for word: after its exit 0
    # they are the only text read, since the rest is the model's edits and talk.
    "infra_patterns": {
        "auth": [r"\bThe API provider is not able to authenticate you\b"],
        "rate-limit": [r"\bThe API provider has rate limited you\b"],
        "network": [
            r"\bThe API provider's servers are down or overloaded\b",
            r"\bThe API provider timed out without returning a response\b",
        ],
    },
}

# Gemini CLI: `-p` makes it headless and is appended to stdin, so the prompt
# file goes on stdin and `-p` just says to act on it. Without `--skip-trust` a
# fresh worktree is an untrusted folder and headless mode exits 55.
GEMINI: dict[str, object] = {
    "written_for": "Gemini CLI (5411f11)",
    "command": [
        "gemini",
        "--approval-mode=yolo",
        "--skip-trust",
        "-o",
        "json",
        "-m",
        "{model}",
        "-p",
        "Carry out the task described above.",
    ],
    "prompt_on_stdin": True,
    "models": ["flash-lite", "flash", "pro"],
    # No thinking flag: effort is a settings file matter, so no effort ladder.
    "efforts": [],
    "default_model": "flash",
    "usage_format": "gemini",
    "env": {"GEMINI_TELEMETRY_ENABLED": "false"},
    "isolate_env": {"GEMINI_CLI_HOME": "{state_dir}/{task}/gemini"},
    # Only the logins that need no state in GEMINI_CLI_HOME: an API key, or
    # Vertex AI / Code Assist switched on. GOOGLE_API_KEY alone does not pick the
    # auth method (an OAuth user may have it set for other tools).
    "isolate_when": [
        "GEMINI_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI=true",
        "GOOGLE_GENAI_USE_GCA=true",
    ],
    "infra_exit_codes": {"auth": [41]},
    "infra_patterns": {
        "auth": [r"Please set an Auth method", r"API key not valid"],
        # A 429 (RESOURCE_EXHAUSTED) is a rate limit that a wait fixes, even when
        # its text says "quota"; only a daily quota is one the day must pass for
        # (Gemini CLI's own split: googleQuotaErrors.ts).
        "quota": [r"PerDay", r"daily quota"],
        "rate-limit": [
            # While it retries (0.61): "Attempt 2 failed with status 429. Retrying ...".
            r"failed with status 429",
            r"RESOURCE_EXHAUSTED",
            r"Please wait and try again later",
            r"Status: 429",
            r"status 429:",
            r"exceeded your current quota",
        ],
        "network": [r"ECONNRESET", r"ETIMEDOUT", r"ENOTFOUND", r"EAI_AGAIN", r"fetch failed"],
        "server": [r"Status: 5\d\d\b", r"status 5\d\d:"],
    },
}

# The task's prompt is a bash script. Its output is the user's own, so no
# pattern reads it as an infrastructure failure.
SHELL: dict[str, object] = {
    "written_for": "bash",
    "command": ["bash", "{prompt_file}"],
    "script": True,
    "usage_format": "none",
}


def over_preset(name: str, table: Mapping[str, object]) -> Mapping[str, object]:
    """The table an `[agents.NAME]` table stands for: named like a preset, it
    overrides only the keys it sets. A new ladder without a new default drops the
    preset's default, which may not be on it; a new command drops the preset's
    `sandbox_command` and `root_sandbox_command` (unless the table sets them)."""
    preset = PRESET_TABLES.get(name)
    if preset is None:
        return table
    merged = {**preset, **table}
    for nested in ("sandbox_command", "root_sandbox_command"):
        if "command" in table and nested not in table:
            merged.pop(nested, None)  # the user's command, everywhere
    for ladder, default in (("models", "default_model"), ("efforts", "default_effort")):
        on = table.get(ladder)
        if ladder in table and default not in table and not _holds(on, merged.get(default)):
            merged.pop(default, None)
    return merged


def _holds(ladder: object, value: object) -> bool:
    """`value in ladder` for a ladder as a table gives it (a list, unless mistyped)."""
    return isinstance(ladder, Container) and value in ladder


PRESET_TABLES: dict[str, dict[str, object]] = {
    "claude": CLAUDE,
    "codex": CODEX,
    "aider": AIDER,
    "gemini": GEMINI,
    "shell": SHELL,
}
