"""The one rule for an agent's name, in `[agents.NAME]` and in a spec
`NAME:model:effort`, and the spec's parts (kept apart so the hooks' config check,
and a run of shell commands, import only this)."""

from __future__ import annotations

import re

from forge.errors import ForgeError
from forge.frozen import frozen

# No `:` (it separates the spec's parts); a `.` (`my-agent.v2`) needs quotes in a
# TOML table name: [agents."my-agent.v2"].
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
AGENT_NAME_RULE = "a name starts with a letter or digit and uses letters, digits, `_`, `-`, `.`"


def agent_name_problem(name: str) -> str | None:
    """Why `name` cannot name an agent (None if it can)."""
    return None if AGENT_NAME.fullmatch(name) else AGENT_NAME_RULE


@frozen
class AgentSpec:
    """`name[:model[:effort]]`; an empty part (`claude::high`) means the default."""

    name: str
    model: str | None = None
    effort: str | None = None

    @classmethod
    def parse(cls, text: str) -> AgentSpec:
        parts = text.strip().split(":")
        if len(parts) > 3 or agent_name_problem(parts[0]):
            raise ForgeError(
                f"bad agent spec {text!r}: expected name[:model[:effort]], e.g. claude:sonnet:high"
                f" ({AGENT_NAME_RULE})"
            )
        model = parts[1] if len(parts) > 1 and parts[1] else None
        effort = parts[2] if len(parts) > 2 and parts[2] else None
        return cls(parts[0], model, effort)

    @classmethod
    def of(cls, text: str) -> AgentSpec:
        """The parts of a spec as recorded (an attempt's `agent`, a pool's key),
        unchecked: what `parse` accepted when it was written."""
        name, _, rest = text.strip().partition(":")
        model, _, effort = rest.partition(":")
        return cls(name, model or None, effort.partition(":")[0] or None)

    def __str__(self) -> str:
        if self.effort is not None:
            return f"{self.name}:{self.model or ''}:{self.effort}"
        if self.model is not None:
            return f"{self.name}:{self.model}"
        return self.name
