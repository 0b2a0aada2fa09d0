"""Agents: specs (`name[:model[:effort]]`), definitions (a preset or an
`[agents.NAME]` table), and the command and environment of one attempt.

The runner's sequence for one attempt of a prompt task::

    defn, spec = resolve(task_spec, agent_tables)          # ForgeError on a bad spec
    reason = check_binary(defn)                            # not None -> INFRA, no attempt
    write_attempt_file(defn, prompt_path, ...)             # a new file per attempt
    argv, stdin = render_command(defn, spec, prompt_file=prompt_path, task=..., worktree=...)
    env = agent_env(defn, spec, task=..., attempt=..., ...)  # extra vars, on top of clean_env
    ... run argv in the worktree, stdin from `stdin` (else DEVNULL), output to the log ...
    classify_failure(defn, returncode=rc, output=log_text)  # InfraFailure -> INFRA
    parse_usage(defn, log_text)                            # cost/tokens for the attempt record

Presets and the CLI versions they follow: `forge.presets`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.agents_output import (
    INFRA_KINDS,
    InfraFailure,
    Usage,
    classify_failure,
    is_context_overflow,
    parse_usage,
)
from forge.agents_prompt import Feedback, write_attempt_file, write_prompt_file, write_script_file
from forge.errors import ForgeError
from forge.presets import PRESET_TABLES

__all__ = [
    "PRESETS",
    "AgentDef",
    "AgentSpec",
    "Feedback",
    "InfraFailure",
    "Usage",
    "agent_env",
    "check_binary",
    "classify_failure",
    "is_context_overflow",
    "parse_usage",
    "render_command",
    "resolve",
    "write_attempt_file",
    "write_prompt_file",
    "write_script_file",
]

COMMAND_PLACEHOLDERS = ("prompt_file", "model", "effort", "task", "worktree")
ENV_PLACEHOLDERS = (*COMMAND_PLACEHOLDERS, "state_dir")
USAGE_FORMATS = ("claude", "codex", "gemini", "aider", "none")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)?\s*)+$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class AgentSpec:
    """`name[:model[:effort]]`; an empty part (`claude::high`) means the default."""

    name: str
    model: str | None = None
    effort: str | None = None

    @classmethod
    def parse(cls, text: str) -> AgentSpec:
        parts = text.strip().split(":")
        if len(parts) > 3 or not _NAME.match(parts[0]):
            raise ForgeError(
                f"bad agent spec {text!r}: expected name[:model[:effort]], e.g. claude:sonnet:high"
            )
        model = parts[1] if len(parts) > 1 and parts[1] else None
        effort = parts[2] if len(parts) > 2 and parts[2] else None
        return cls(parts[0], model, effort)

    def __str__(self) -> str:
        if self.effort is not None:
            return f"{self.name}:{self.model or ''}:{self.effort}"
        if self.model is not None:
            return f"{self.name}:{self.model}"
        return self.name


@dataclass(frozen=True)
class AgentDef:
    """How to run one agent. Mappings are tuples of pairs so the value stays hashable."""

    name: str
    command: tuple[str, ...]
    models: tuple[str, ...] = ()  # the ladder, weakest first
    efforts: tuple[str, ...] = ()  # weakest first
    default_model: str | None = None
    default_effort: str | None = None
    prompt_on_stdin: bool = False  # feed the prompt file on stdin (else it is in argv)
    script: bool = False  # the prompt file is the task's prompt, run as a script
    env: tuple[tuple[str, str], ...] = ()
    root_env: tuple[tuple[str, str], ...] = ()
    isolate_env: tuple[tuple[str, str], ...] = ()
    isolate_when: tuple[str, ...] = ()
    timeout: float | None = None  # seconds
    infra_patterns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    infra_exit_codes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    infra_on_success: bool = False
    usage_format: str = "none"
    ignore_paths: tuple[str, ...] = ()
    written_for: str | None = None

    @classmethod
    def from_table(cls, name: str, table: Mapping[str, Any]) -> AgentDef:
        """Build from an `[agents.NAME]` table; every problem in one line of ForgeError."""
        problems: list[str] = []
        get = _Reader(table, problems)
        unknown = sorted(set(table) - set(_TABLE_KEYS))
        if unknown:
            problems.append(f"unknown key {', '.join(unknown)} (known: {', '.join(_TABLE_KEYS)})")
        command = get.str_list("command", nonempty=True) if "command" in table else []
        if "command" not in table:
            problems.append('needs command = ["program", "arg", ...]')
        models = get.str_list("models", unique=True)
        efforts = get.str_list("efforts", unique=True)
        env = get.str_map("env")
        root_env = get.str_map("root_env")
        isolate_env = get.str_map("isolate_env")
        for arg in command:
            _check_placeholders(arg, COMMAND_PLACEHOLDERS, "command", problems)
        for key, mapping in (("env", env), ("root_env", root_env), ("isolate_env", isolate_env)):
            for value in mapping.values():
                _check_placeholders(value, ENV_PLACEHOLDERS, key, problems)
        used = {m for arg in command for m in _PLACEHOLDER.findall(arg)}
        if "model" in used and not models:
            problems.append("command uses {model} but models is empty")
        if "effort" in used and not efforts:
            problems.append("command uses {effort} but efforts is empty")
        default_model = get.choice("default_model", models, "models")
        default_effort = get.choice("default_effort", efforts, "efforts")
        usage_format = get.string("usage_format") or "none"
        if usage_format not in USAGE_FORMATS:
            problems.append(f"usage_format must be one of {', '.join(USAGE_FORMATS)}")
        defn = cls(
            name=name,
            command=tuple(command),
            models=tuple(models),
            efforts=tuple(efforts),
            default_model=default_model,
            default_effort=default_effort,
            prompt_on_stdin=get.flag("prompt_on_stdin"),
            script=get.flag("script"),
            env=tuple(env.items()),
            root_env=tuple(root_env.items()),
            isolate_env=tuple(isolate_env.items()),
            isolate_when=tuple(get.str_list("isolate_when")),
            timeout=get.duration("timeout"),
            infra_patterns=get.patterns("infra_patterns"),
            infra_exit_codes=get.exit_codes("infra_exit_codes"),
            infra_on_success=get.flag("infra_on_success"),
            usage_format=usage_format,
            ignore_paths=tuple(get.str_list("ignore_paths")),
            written_for=get.string("written_for"),
        )
        if problems:
            raise ForgeError(f"[agents.{name}]: " + "; ".join(problems))
        return defn


_TABLE_KEYS = (
    "command",
    "models",
    "efforts",
    "default_model",
    "default_effort",
    "prompt_on_stdin",
    "script",
    "env",
    "root_env",
    "isolate_env",
    "isolate_when",
    "timeout",
    "infra_patterns",
    "infra_exit_codes",
    "infra_on_success",
    "usage_format",
    "ignore_paths",
    "written_for",
)


class _Reader:
    """Typed reads of a TOML table that record a problem instead of raising."""

    def __init__(self, table: Mapping[str, Any], problems: list[str]) -> None:
        self.table = table
        self.problems = problems

    def _bad(self, key: str, want: str) -> None:
        self.problems.append(f"{key} must be {want}")

    def string(self, key: str) -> str | None:
        value = self.table.get(key)
        if value is None or (isinstance(value, str) and value):
            return value
        self._bad(key, "a non-empty string")
        return None

    def flag(self, key: str) -> bool:
        value = self.table.get(key, False)
        if isinstance(value, bool):
            return value
        self._bad(key, "true or false")
        return False

    def str_list(self, key: str, *, nonempty: bool = False, unique: bool = False) -> list[str]:
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self._bad(key, "a list of non-empty strings")
            return []
        if nonempty and not value:
            self._bad(key, "a non-empty list of strings")
        if unique and len(set(value)) != len(value):
            self._bad(key, "a list without repeats")
        return list(value)

    def str_map(self, key: str) -> dict[str, str]:
        value = self.table.get(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            self._bad(key, 'a table of strings, e.g. {NAME = "value"}')
            return {}
        return dict(value)

    def choice(self, key: str, allowed: list[str], ladder: str) -> str | None:
        value = self.string(key)
        if value is not None and value not in allowed:
            self.problems.append(f"{key} {value!r} is not in {ladder} ({', '.join(allowed)})")
            return None
        return value

    def duration(self, key: str) -> float | None:
        value = self.table.get(key)
        if value is None:
            return None
        seconds = parse_duration(value)
        if seconds is None:
            self._bad(key, 'a duration like "30m", "90s" or "1h30m", or a number of seconds')
        return seconds

    def _kind_table(self, key: str) -> dict[str, list[Any]]:
        value = self.table.get(key, {})
        if not isinstance(value, Mapping):
            self._bad(key, f"a table by kind ({', '.join(INFRA_KINDS)})")
            return {}
        out: dict[str, list[Any]] = {}
        for kind, item in value.items():
            if kind not in INFRA_KINDS:
                self.problems.append(
                    f"{key}: unknown kind {kind!r} (known: {', '.join(INFRA_KINDS)})"
                )
                continue
            out[kind] = list(item) if isinstance(item, list) else [item]
        return out

    def patterns(self, key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        out = []
        for kind, items in self._kind_table(key).items():
            good = []
            for item in items:
                if not isinstance(item, str) or not item:
                    self.problems.append(f"{key}.{kind} must be a regex or a list of them")
                    continue
                try:
                    re.compile(item)
                except re.error as exc:
                    self.problems.append(f"{key}.{kind}: bad regex {item!r}: {exc}")
                    continue
                good.append(item)
            out.append((kind, tuple(good)))
        return tuple(out)

    def exit_codes(self, key: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for kind, items in self._kind_table(key).items():
            if not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
                self.problems.append(f"{key}.{kind} must be an exit code or a list of them")
                continue
            out.append((kind, tuple(items)))
        return tuple(out)


def parse_duration(value: object) -> float | None:
    """Seconds from `30m`, `90s`, `1h30m`, `1.5h` or a plain number; None if malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value > 0 else None
    if not isinstance(value, str) or not _DURATION.match(value):
        return None
    total = sum(
        float(num) * _UNIT_SECONDS[(unit or "s").lower()]
        for num, unit in _DURATION_PART.findall(value)
    )
    return total if total > 0 else None


def _check_placeholders(text: str, known: tuple[str, ...], key: str, problems: list[str]) -> None:
    for name in _PLACEHOLDER.findall(text):
        if name not in known:
            problems.append(
                f"{key}: unknown placeholder {{{name}}} (known: "
                + ", ".join("{" + k + "}" for k in known)
                + ")"
            )


PRESETS: dict[str, AgentDef] = {
    name: AgentDef.from_table(name, table) for name, table in PRESET_TABLES.items()
}


def _merge_over_preset(preset: Mapping[str, Any], table: Mapping[str, Any]) -> dict[str, Any]:
    """A table named like a preset overrides only the keys it sets. A new ladder
    without a new default drops the preset's default, which may not be on it."""
    merged = {**preset, **table}
    for ladder, default in (("models", "default_model"), ("efforts", "default_effort")):
        if ladder in table and default not in table and merged.get(default) not in table[ladder]:
            merged.pop(default, None)
    return merged


def resolve(
    spec: AgentSpec | str, defs: Mapping[str, Mapping[str, Any]]
) -> tuple[AgentDef, AgentSpec]:
    """The definition of `spec`'s agent and the spec with its defaults filled in.

    `defs` holds the raw `[agents.NAME]` tables, plan ones already merged over
    forge.toml ones by the caller.
    """
    if isinstance(spec, str):
        spec = AgentSpec.parse(spec)
    table = defs.get(spec.name)
    if table is not None:
        if not isinstance(table, Mapping):
            raise ForgeError(f"[agents.{spec.name}] must be a table")
        preset = PRESET_TABLES.get(spec.name)
        defn = AgentDef.from_table(
            spec.name, _merge_over_preset(preset, table) if preset else table
        )
    elif spec.name in PRESETS:
        defn = PRESETS[spec.name]
    else:
        known = sorted({*PRESETS, *defs})
        raise ForgeError(
            f"unknown agent {spec.name!r}: use one of {', '.join(known)}, "
            f"or define [agents.{spec.name}] in forge.toml or the plan"
        )
    model = _pick(defn, "model", spec.model, defn.models, defn.default_model)
    effort = _pick(defn, "effort", spec.effort, defn.efforts, defn.default_effort)
    return defn, AgentSpec(spec.name, model, effort)


def _pick(
    defn: AgentDef, what: str, asked: str | None, ladder: tuple[str, ...], default: str | None
) -> str | None:
    if asked is None:
        return default if default is not None else (ladder[0] if ladder else None)
    if not ladder:
        raise ForgeError(
            f"agent {defn.name} takes no {what} (got {asked!r}); "
            f"give [agents.{defn.name}] a list of {what}s to allow one"
        )
    if asked not in ladder:
        raise ForgeError(
            f"agent {defn.name} has no {what} {asked!r}: choose one of {', '.join(ladder)} "
            f"(or set {what}s in [agents.{defn.name}])"
        )
    return asked


def _fill(text: str, values: Mapping[str, str | None], on_missing: Callable[[str], str]) -> str:
    def one(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        return value if value is not None else on_missing(match.group(1))

    return _PLACEHOLDER.sub(one, text)


def render_command(
    defn: AgentDef, spec: AgentSpec, *, prompt_file: Path, task: str, worktree: Path
) -> tuple[list[str], Path | None]:
    """The argv of one attempt and the file to feed on stdin (None: stdin is DEVNULL)."""
    if not prompt_file.is_absolute() or not worktree.is_absolute():
        raise ValueError("prompt_file and worktree must be absolute paths")
    values = {
        "prompt_file": str(prompt_file),
        "model": spec.model,
        "effort": spec.effort,
        "task": task,
        "worktree": str(worktree),
    }

    def missing(name: str) -> str:
        raise ForgeError(f"agent {defn.name}'s command uses {{{name}}} but the spec sets no {name}")

    argv = [_fill(arg, values, missing) for arg in defn.command]
    return argv, (prompt_file if defn.prompt_on_stdin else None)


def agent_env(
    defn: AgentDef,
    spec: AgentSpec,
    *,
    task: str,
    attempt: int,
    prompt_file: Path,
    feedback_file: Path | None,
    state_dir: Path,
    worktree: Path | None = None,
    environ: Mapping[str, str] | None = None,
    as_root: bool | None = None,
) -> dict[str, str]:
    """The variables an attempt adds to `proc.clean_env()`.

    `state_dir` is a directory of the runner's for agents' state, outside any
    worktree; all tasks of a plan may share it (the presets put `{task}` in the
    paths under it). It is created, with the directories of `isolate_env` and
    the parents of `env` paths that use it.

    Per-task config dirs (`isolate_env`: CLAUDE_CONFIG_DIR, CODEX_HOME,
    GEMINI_CLI_HOME) are set only when one of `isolate_when` (an API key) is in
    the environment. A fresh config dir holds no login, and copying the user's
    credentials in is worse: OAuth refresh tokens rotate, so a copy that
    refreshes would log the user's own CLI out. Without a key the agents share
    the user's config, as the user's own parallel sessions would.
    """
    environ = os.environ if environ is None else environ
    as_root = (os.geteuid() == 0) if as_root is None else as_root
    values = {
        "prompt_file": str(prompt_file),
        "model": spec.model or "",
        "effort": spec.effort or "",
        "task": task,
        "worktree": str(worktree) if worktree else "",
        "state_dir": str(state_dir),
    }
    state_dir.mkdir(parents=True, exist_ok=True)
    env: dict[str, str] = {}
    for key, value in defn.env:
        env[key] = _fill(value, values, lambda _: "")
        if "{state_dir}" in value:
            Path(env[key]).parent.mkdir(parents=True, exist_ok=True)
    if as_root:
        env.update((k, _fill(v, values, lambda _: "")) for k, v in defn.root_env)
    if defn.isolate_env and (
        not defn.isolate_when or any(environ.get(k) for k in defn.isolate_when)
    ):
        for key, value in defn.isolate_env:
            env[key] = _fill(value, values, lambda _: "")
            Path(env[key]).mkdir(parents=True, exist_ok=True)
    # Last, so no table can hide from the agent which attempt it is.
    env.update(
        FORGE_TASK=task,
        FORGE_ATTEMPT=str(attempt),
        FORGE_PROMPT_FILE=str(prompt_file),
        FORGE_MODEL=spec.model or "",
        FORGE_EFFORT=spec.effort or "",
        FORGE_STATE_DIR=str(state_dir),
    )
    if worktree is not None:
        env["FORGE_WORKTREE"] = str(worktree)
    if feedback_file is not None:
        env["FORGE_FEEDBACK_FILE"] = str(feedback_file)
    return env


def check_binary(defn: AgentDef, *, path: str | None = None) -> str | None:
    """Why the agent's program cannot be started, or None when it is there (or
    cannot be known before the run: a placeholder or a worktree-relative path)."""
    exe = defn.command[0]
    if _PLACEHOLDER.search(exe):
        return None
    hint = (
        f"install it, or point [agents.{defn.name}] command at it"
        if defn.name in PRESETS
        else f"fix [agents.{defn.name}] command"
    )
    if "/" in exe:
        if not os.path.isabs(exe):
            return None
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return None
        return f"agent {defn.name}: {exe} is not an executable file ({hint})"
    if shutil.which(exe, path=path if path is not None else os.environ.get("PATH")) is None:
        return f"agent {defn.name}: `{exe}` not found on PATH ({hint})"
    return None
