"""An agent as the planner of `forge draft`: its command in the CLI's read-only mode
where it has one, and the plan read back from what it printed.

A read-only planner cannot write the file named by FORGE_PLAN_FILE; it answers in a
```toml block of its output instead (a CLI's JSON events carry that text in their
strings: Claude's `result`, Codex's `agent_message`, Gemini's `response`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from forge.agents.definition import AgentDef
from forge.agents.output import read_log

# Per preset, the arguments of its task command swapped for its read-only mode. A
# user's own `command` without them runs as written (and may then write the file).
READ_ONLY: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # Claude Code's plan mode: read-only tools only.
    "claude": (("--permission-mode", "bypassPermissions"), ("--permission-mode", "plan")),
    # Codex's read-only sandbox: no write anywhere.
    "codex": (("--sandbox", "workspace-write"), ("--sandbox", "read-only")),
    # Headless Gemini CLI denies every tool that would ask in the default mode (its
    # plan mode approves its own exit when headless, then goes on to edit).
    "gemini": (("--approval-mode=yolo",), ("--approval-mode=default",)),
    # aider's ask mode answers questions about the code and never edits it.
    "aider": (("--yes-always",), ("--chat-mode", "ask", "--yes-always")),
}

_BLOCK = re.compile(r"^[ \t]*(`{3,})[ \t]*(toml)?[ \t]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S | re.I)


def as_planner(defn: AgentDef) -> tuple[AgentDef, bool]:
    """The definition a planner runs with, and whether it is read-only. Its commands
    in forge's sandbox are swapped the same way; one without the task's arguments
    stays as it is (Codex as root there: its own sandbox, read-only too, could
    not start; forge's keeps its writes in the checkout)."""
    swap = READ_ONLY.get(defn.name)
    if swap is None:
        return defn, False
    command = _swapped(defn.command, *swap)
    if command is None:
        return defn, False
    nested = _swapped(defn.sandbox_command, *swap) or defn.sandbox_command
    root = _swapped(defn.root_sandbox_command, *swap) or defn.root_sandbox_command
    new = dataclasses.replace(
        defn, command=command, sandbox_command=nested, root_sandbox_command=root
    )
    return new, True


def _swapped(
    cmd: tuple[str, ...], old: tuple[str, ...], new: tuple[str, ...]
) -> tuple[str, ...] | None:
    """`cmd` with its first `old` run of arguments replaced by `new` (None: none)."""
    for i in range(len(cmd) - len(old) + 1):
        if cmd[i : i + len(old)] == old:
            return (*cmd[:i], *new, *cmd[i + len(old) :])
    return None


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def last_plan_block(text: str) -> str | None:
    """The last fenced block of `text` that is TOML (```toml, or a bare fence around
    `[[task]]` tables)."""
    found = [m.group(3) for m in _BLOCK.finditer(text) if m.group(2) or "[[task]]" in m.group(3)]
    return found[-1] if found else None


def answer_in_output(output: str) -> str | None:
    """The plan a planner printed: the last TOML block of its JSON events' text, or
    of its plain output when it printed no JSON with one."""
    values = read_log(output).values
    for text in reversed([s for v in values for s in _strings(v) if "```" in s]):
        block = last_plan_block(text)
        if block is not None:
            return block
    return last_plan_block(output)
