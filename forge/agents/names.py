"""The one rule for an agent's name, in `[agents.NAME]` and in a spec
`NAME:model:effort` (kept apart so the hooks' config check imports only this)."""

from __future__ import annotations

import re

# No `:` (it separates the spec's parts); a `.` (`my-agent.v2`) needs quotes in a
# TOML table name: [agents."my-agent.v2"].
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
AGENT_NAME_RULE = "a name starts with a letter or digit and uses letters, digits, `_`, `-`, `.`"


def agent_name_problem(name: str) -> str | None:
    """Why `name` cannot name an agent (None if it can)."""
    return None if AGENT_NAME.fullmatch(name) else AGENT_NAME_RULE
