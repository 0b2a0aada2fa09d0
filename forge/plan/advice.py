"""Warnings about a plan that is valid but likely to mislead (printed by `forge plan`).

The one known so far: a `setup` that installs into an environment shared by every
worktree. An editable install there points at whichever worktree installed last,
so verification may import another worktree's code and pass a broken commit.
"""

from __future__ import annotations

import re

from forge.plan.model import Plan

# `pip install`, `pip3 install`, `python -m pip install`, `uv pip install`: the
# group is the program that names the environment (pip itself, or the python).
_INSTALL = re.compile(
    r"(?P<prog>[^\s;&|()]*?(?:pip3?|python3?(?:\.\d+)?\s+-m\s+pip|uv\s+pip))\s+install\b"
)

PER_WORKTREE = (
    'setup = "python -m venv .venv && .venv/bin/pip install -e ." with '
    'env = { PATH = "{worktree}/.venv/bin:$PATH" }'
)


def _inside_worktree(program: str) -> bool:
    """A program named by a relative path (`.venv/bin/pip`) is the worktree's own."""
    first = program.split()[0]
    return "/" in first and not first.startswith(("/", "~", "$"))


def _env_is_per_worktree(plan: Plan) -> bool:
    path = plan.env.get("PATH", "")
    venv = plan.env.get("VIRTUAL_ENV", "")
    return path.startswith("{worktree}") or "{worktree}" in venv


def warnings(plan: Plan) -> list[str]:
    out: list[str] = []
    if plan.setup and not _env_is_per_worktree(plan):
        shared = [
            m["prog"] for m in _INSTALL.finditer(plan.setup) if not _inside_worktree(m["prog"])
        ]
        if shared:
            out.append(
                f"`setup` installs with `{shared[0]} install` into an environment every "
                f"worktree shares: an editable install there points at whichever worktree "
                f"installed last, and verification may import another worktree's code. "
                f"Give each worktree its own environment: {PER_WORKTREE}"
            )
    return out
