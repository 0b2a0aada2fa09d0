"""Agents: specs (`name[:model[:effort]]`), definitions (a preset or an
`[agents.NAME]` table), and the command and environment of one attempt.

The runner's sequence for one attempt of a prompt task::

    defn, spec = resolve(task_spec, agent_tables)          # ForgeError on a bad spec
    reason = check_binary(defn)                            # not None -> INFRA, no attempt
    write_attempt_file(defn, prompt_path, TaskText(...), ...)  # a new file per attempt
    argv, stdin = render_command(defn, spec, prompt_file=prompt_path, task=..., worktree=...)
    env = agent_env(defn, spec, AgentCall(task, attempt, ...))  # extra vars, on top of clean_env
    ... run argv in the worktree, stdin from `stdin` (else DEVNULL), output to the log ...
    classify_failure(defn, returncode=rc, output=log_text)  # InfraFailure -> INFRA
    parse_usage(defn, log_text)                            # cost/tokens for the attempt record

Presets and the CLI versions they follow: `forge.agents.presets`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from forge.agents import config_home
from forge.agents.definition import PLACEHOLDER, AgentDef
from forge.agents.names import AgentSpec
from forge.agents.output import (
    InfraFailure,
    classify_failure,
    failure_reason,
    is_context_overflow,
    said_error,
)
from forge.agents.presets import PRESET_TABLES, over_preset
from forge.agents.prompt import (
    Feedback,
    TaskText,
    write_attempt_file,
    write_prompt_file,
    write_review_file,
    write_script_file,
)
from forge.agents.usage import Usage, parse_usage
from forge.errors import ForgeError
from forge.frozen import frozen

__all__ = [
    "PRESETS",
    "AgentCall",
    "AgentDef",
    "AgentSpec",
    "Feedback",
    "InfraFailure",
    "TaskText",
    "Usage",
    "agent_env",
    "check_binary",
    "classify_failure",
    "failure_reason",
    "is_context_overflow",
    "parse_usage",
    "render_command",
    "resolve",
    "said_error",
    "write_attempt_file",
    "write_prompt_file",
    "write_review_file",
    "write_script_file",
]


PRESETS: dict[str, AgentDef] = {
    name: AgentDef.from_table(name, table) for name, table in PRESET_TABLES.items()
}


def resolve(spec: AgentSpec | str, defs: Mapping[str, object]) -> tuple[AgentDef, AgentSpec]:
    """The definition of `spec`'s agent and the spec with its defaults filled in.

    `defs` holds the raw `[agents.NAME]` tables, plan ones already merged over
    forge.toml ones by the caller. A run reads its tables once (forge/agents/book.py).
    """
    if isinstance(spec, str):
        spec = AgentSpec.parse(spec)
    table = defs.get(spec.name)
    if table is not None:
        if not isinstance(table, Mapping):
            raise ForgeError(f"[agents.{spec.name}] must be a table")
        return filled(AgentDef.from_table(spec.name, over_preset(spec.name, table)), spec)
    return filled(preset(spec.name, defs), spec)


def preset(name: str, defs: Mapping[str, object]) -> AgentDef:
    """The preset `name`, or the one-line error naming the agents there are."""
    if name in PRESETS:
        return PRESETS[name]
    known = sorted({*PRESETS, *defs})
    raise ForgeError(
        f"unknown agent {name!r}: use one of {', '.join(known)}, "
        f"or define [agents.{name}] in forge.toml or the plan"
    )


def filled(defn: AgentDef, spec: AgentSpec) -> tuple[AgentDef, AgentSpec]:
    """`spec` with the model and effort `defn` picks when it names none."""
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

    return PLACEHOLDER.sub(one, text)


def render_command(
    defn: AgentDef,
    spec: AgentSpec,
    *,
    prompt_file: Path,
    task: str,
    worktree: Path,
    review_file: Path | None = None,
) -> tuple[list[str], Path | None]:
    """The argv of one attempt and the file to feed on stdin (None: stdin is DEVNULL).
    `review_file` is where a reviewer writes its verdict (reviews only)."""
    if not prompt_file.is_absolute() or not worktree.is_absolute():
        raise ValueError("prompt_file and worktree must be absolute paths")
    values = {
        "prompt_file": str(prompt_file),
        "model": spec.model,
        "effort": spec.effort,
        "task": task,
        "worktree": str(worktree),
        "review_file": None if review_file is None else str(review_file),
    }

    def missing(name: str) -> str:
        if name == "review_file":
            raise ForgeError(
                f"agent {defn.name}'s command uses {{review_file}}: use it only as a reviewer"
            )
        raise ForgeError(f"agent {defn.name}'s command uses {{{name}}} but the spec sets no {name}")

    argv = [_fill(arg, values, missing) for arg in defn.command]
    return argv, (prompt_file if defn.prompt_on_stdin else None)


@frozen
class AgentCall:
    """One call of an agent: which task and attempt, and the files it is given."""

    task: str
    attempt: int
    prompt_file: Path
    state_dir: Path  # the agents' own state (their CLI homes), outside any worktree
    feedback_file: Path | None = None  # a retry's feedback
    worktree: Path | None = None
    review_file: Path | None = None  # where a reviewer writes its verdict


def agent_env(
    defn: AgentDef,
    spec: AgentSpec,
    call: AgentCall,
    *,
    environ: Mapping[str, str] | None = None,
    as_root: bool | None = None,
) -> dict[str, str]:
    """The variables an attempt adds to `proc.clean_env()`.

    `call.state_dir` is a directory of the runner's for agents' state, outside any
    worktree; all tasks of a plan may share it (the presets put `{task}` in the
    paths under it). It is created, with the directories of `isolate_env` and
    the parents of `env` paths that use it.

    Per-task config dirs (`isolate_env`: CLAUDE_CONFIG_DIR, CODEX_HOME,
    GEMINI_CLI_HOME) are set only when one of `isolate_when` (an API key) is in
    the environment. Each links the user's own configuration (their folder, or
    the one their variable names) and keeps only sessions, history and locks
    per task (`forge.agents.config_home`). Login tokens are not shared: OAuth
    refresh tokens rotate, so a task that refreshed one would log the user's
    own CLI out. Without a key the agents share the user's config, as the
    user's own parallel sessions would.
    """
    environ = os.environ if environ is None else environ
    as_root = (os.geteuid() == 0) if as_root is None else as_root
    task, attempt, prompt_file, state_dir = (
        call.task,
        call.attempt,
        call.prompt_file,
        call.state_dir,
    )
    worktree, feedback_file, review_file = call.worktree, call.feedback_file, call.review_file
    values = {
        "prompt_file": str(prompt_file),
        "model": spec.model or "",
        "effort": spec.effort or "",
        "task": task,
        "worktree": str(worktree) if worktree else "",
        "review_file": str(review_file) if review_file else "",
        "state_dir": str(state_dir),
    }
    state_dir.mkdir(parents=True, exist_ok=True)
    env = _table_env(defn, values, environ=environ, as_root=as_root)
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
    if review_file is not None:
        env["FORGE_REVIEW_FILE"] = str(review_file)
    return env


def _table_env(
    defn: AgentDef, values: Mapping[str, str], *, environ: Mapping[str, str], as_root: bool
) -> dict[str, str]:
    """The definition's own variables, placeholders filled: `env`, then `root_env`
    when running as root, then `isolate_env` when an API key (in the environment
    or the table's `env`) asks for isolation (creating the folders they name)."""
    env: dict[str, str] = {}
    for key, value in defn.env:
        env[key] = _fill(value, values, lambda _: "")
        if "{state_dir}" in value:
            Path(env[key]).parent.mkdir(parents=True, exist_ok=True)
    if as_root:
        env.update((k, _fill(v, values, lambda _: "")) for k, v in defn.root_env)
    # A key the table's own `env` sets counts as one in the environment.
    if defn.isolate_env and defn.isolates({**environ, **env}):
        for key, value in defn.isolate_env:
            env[key] = _fill(value, values, lambda _: "")
            # Per task: sessions, history, locks. Everything else is the user's.
            config_home.populate(key, Path(env[key]), environ)
    return env


def check_binary(defn: AgentDef, *, path: str | None = None) -> str | None:
    """Why the agent's program cannot be started, or None when it is there (or
    cannot be known before the run: a placeholder or a worktree-relative path)."""
    exe = defn.command[0]
    if PLACEHOLDER.search(exe):
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
