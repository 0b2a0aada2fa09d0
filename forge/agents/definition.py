"""`AgentDef`: how to run one agent, and its reading from an `[agents.NAME]` table
(the keys are described in `forge.agents.presets`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forge.errors import ForgeError

# The kinds of infrastructure failure an agent definition may name patterns for.
INFRA_KINDS = ("binary-missing", "auth", "quota", "rate-limit", "network")

COMMAND_PLACEHOLDERS = ("prompt_file", "model", "effort", "task", "worktree")
ENV_PLACEHOLDERS = (*COMMAND_PLACEHOLDERS, "state_dir")
USAGE_FORMATS = ("claude", "codex", "gemini", "aider", "none")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)?\s*)+$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


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

    def isolates(self, environ: Mapping[str, str]) -> bool:
        """Whether `isolate_env` applies: no `isolate_when`, or one of its entries
        holds. `VAR` holds when VAR is set and not empty; `VAR=value` when VAR
        equals value (case aside), so a switch set to "false" does not count."""
        if not self.isolate_when:
            return True
        for entry in self.isolate_when:
            key, sep, want = entry.partition("=")
            have = environ.get(key)
            if have and (not sep or have.strip().lower() == want.strip().lower()):
                return True
        return False

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
        used = {m for arg in command for m in PLACEHOLDER.findall(arg)}
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
    for name in PLACEHOLDER.findall(text):
        if name not in known:
            problems.append(
                f"{key}: unknown placeholder {{{name}}} (known: "
                + ", ".join("{" + k + "}" for k in known)
                + ")"
            )
