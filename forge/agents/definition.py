"""`AgentDef`: how to run one agent, and its reading from an `[agents.NAME]` table
(the keys are described in `forge.agents.presets`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from forge.base.tomlread import LineOf, Problems, TableReader, no_lines
from forge.errors import ForgeError
from forge.frozen import frozen

# The kinds of infrastructure failure an agent definition may name patterns for.
INFRA_KINDS = ("binary-missing", "auth", "quota", "rate-limit", "network", "server", "model")
# Waiting cannot fix these: the run pauses at once instead of backing off.
PAUSE_AT_ONCE = frozenset({"binary-missing", "auth", "model"})

COMMAND_PLACEHOLDERS = ("prompt_file", "model", "effort", "task", "worktree", "review_file")
ENV_PLACEHOLDERS = (*COMMAND_PLACEHOLDERS, "state_dir")
USAGE_FORMATS = ("claude", "codex", "gemini", "aider", "none")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@frozen
class AgentDef:
    """How to run one agent. Mappings are tuples of pairs so the value stays hashable."""

    name: str
    command: tuple[str, ...]
    # Run instead of `command` in forge's own sandbox (as root: `root_sandbox_command`
    # first), where the CLI's own sandbox needs telling (see forge.agents.presets).
    sandbox_command: tuple[str, ...] = ()
    root_sandbox_command: tuple[str, ...] = ()
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
    stop_on_infra: bool = False  # stop the CLI when it prints one of its infra_patterns
    # A CLI that exits 0 after an API error (aider): lines that are its error, said
    # as the reason when the run changed nothing.
    error_patterns: tuple[str, ...] = ()
    usage_format: str = "none"
    ignore_paths: tuple[str, ...] = ()
    written_for: str | None = None
    max_parallel: int | None = None  # tasks on this agent at once (None: no cap)

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
    def from_table(cls, name: str, table: Mapping[str, object]) -> AgentDef:
        """Build from an `[agents.NAME]` table, or a ForgeError with every problem.

        Without the file at hand (a table recorded with a plan) the problems are one
        line, joined by "; ": it may end up as an attempt's one-line reason. Tables
        read from a file are checked with `read`, which says each problem's line."""
        problems = Problems(None)
        defn = cls.read(name, table, problems)
        if defn is None:
            raise ForgeError(f"[agents.{name}]: " + "; ".join(problems.items))
        return defn

    @classmethod
    def read(
        cls,
        name: str,
        table: Mapping[str, object],
        problems: Problems,
        *,
        what: str | None = None,
        line_of: LineOf = no_lines,
    ) -> AgentDef | None:
        """Read an `[agents.NAME]` table, adding every problem (at its key's line) to
        `problems`; None when there was any."""
        before = len(problems.items)
        # Without `what` (no file) the caller names the table once, before them all.
        get = TableReader(table, problems, what=what or "", line_of=line_of)
        get.unknown_keys(TABLE_KEYS)
        command = get.str_list("command", nonempty=True) if "command" in table else []
        if "command" not in table:
            get.problem('needs command = ["program", "arg", ...]')
        nested, root_nested = (
            get.str_list(key, nonempty=True) if key in table else []
            for key in ("sandbox_command", "root_sandbox_command")
        )
        models = get.str_list("models", unique=True)
        efforts = get.str_list("efforts", unique=True)
        env = get.str_map("env")
        root_env = get.str_map("root_env")
        isolate_env = get.str_map("isolate_env")
        commands = {"command": command, "sandbox_command": nested}
        commands["root_sandbox_command"] = root_nested
        for key, argv in commands.items():
            for arg in argv:
                _check_placeholders(arg, COMMAND_PLACEHOLDERS, key, get)
        for key, mapping in (("env", env), ("root_env", root_env), ("isolate_env", isolate_env)):
            for value in mapping.values():
                _check_placeholders(value, ENV_PLACEHOLDERS, key, get)
        used = {m for arg in command for m in PLACEHOLDER.findall(arg)}
        if "model" in used and not models:
            get.problem("command uses {model} but models is empty", "command")
        if "effort" in used and not efforts:
            get.problem("command uses {effort} but efforts is empty", "command")
        default_model = get.choice("default_model", models, "models")
        default_effort = get.choice("default_effort", efforts, "efforts")
        usage_format = get.string("usage_format") or "none"
        if usage_format not in USAGE_FORMATS:
            get.problem(f"usage_format must be one of {', '.join(USAGE_FORMATS)}", "usage_format")
        defn = cls(
            name=name,
            command=tuple(command),
            sandbox_command=tuple(nested),
            root_sandbox_command=tuple(root_nested),
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
            infra_patterns=_patterns(get, "infra_patterns"),
            infra_exit_codes=_exit_codes(get, "infra_exit_codes"),
            infra_on_success=get.flag("infra_on_success"),
            stop_on_infra=get.flag("stop_on_infra"),
            error_patterns=_regexes(get, "error_patterns"),
            usage_format=usage_format,
            ignore_paths=tuple(get.str_list("ignore_paths")),
            written_for=get.string("written_for"),
            max_parallel=_positive_int(get, "max_parallel"),
        )
        return defn if len(problems.items) == before else None


TABLE_KEYS = (
    "command",
    "sandbox_command",
    "root_sandbox_command",
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
    "stop_on_infra",
    "error_patterns",
    "usage_format",
    "ignore_paths",
    "written_for",
    "max_parallel",
)


def _kind_table(get: TableReader, key: str) -> dict[str, list[object]]:
    value = get.table.get(key, {})
    if not isinstance(value, Mapping):
        get.bad(key, f"a table by kind ({', '.join(INFRA_KINDS)})")
        return {}
    out: dict[str, list[object]] = {}
    for kind, item in value.items():
        if kind not in INFRA_KINDS:
            get.problem(f"{key}: unknown kind {kind!r} (known: {', '.join(INFRA_KINDS)})", key)
            continue
        out[kind] = list(item) if isinstance(item, list) else [item]
    return out


def _patterns(get: TableReader, key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for kind, items in _kind_table(get, key).items():
        good = []
        for item in items:
            if not isinstance(item, str) or not item:
                get.problem(f"{key}.{kind} must be a regex or a list of them", key)
                continue
            try:
                re.compile(item)
            except re.error as exc:
                get.problem(f"{key}.{kind}: bad regex {item!r}: {exc}", key)
                continue
            good.append(item)
        out.append((kind, tuple(good)))
    return tuple(out)


def _regexes(get: TableReader, key: str) -> tuple[str, ...]:
    good = []
    for item in get.str_list(key):
        try:
            re.compile(item)
        except re.error as exc:
            get.problem(f"{key}: bad regex {item!r}: {exc}", key)
            continue
        good.append(item)
    return tuple(good)


def _positive_int(get: TableReader, key: str) -> int | None:
    value = get.table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        get.bad(key, "a whole number of at least 1")
        return None
    return value


def _exit_codes(get: TableReader, key: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for kind, items in _kind_table(get, key).items():
        codes = tuple(i for i in items if isinstance(i, int) and not isinstance(i, bool))
        if len(codes) != len(items):
            get.problem(f"{key}.{kind} must be an exit code or a list of them", key)
            continue
        out.append((kind, codes))
    return tuple(out)


def _check_placeholders(text: str, known: tuple[str, ...], key: str, get: TableReader) -> None:
    for name in PLACEHOLDER.findall(text):
        if name not in known:
            get.problem(
                f"{key}: unknown placeholder {{{name}}} (known: "
                + ", ".join("{" + k + "}" for k in known)
                + ")",
                key,
            )
