"""The settings a forge process runs with, in one object.

Built once by the entry point (the CLI, the hook runner) from its flags and the
environment, then carried (on the Repository, so the run, the verification and the
hooks all see the same values). Nothing else reads these variables, and nothing
writes the environment: a child that must see a setting gets it in its own env.

    FORGE_WORKTREES      where task worktrees and verification checkouts live
    FORGE_GRACE          seconds between TERM and KILL when stopping an agent
    FORGE_INFRA_BACKOFF  first wait after an infrastructure failure, doubled each time
    FORGE_LOG_CAP        bytes of one command's output kept in its log (read where
                         the log is written, forge/base/logs.py; checked here, at
                         start, so a bad value is one line, not every attempt spent)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from forge.base.durations import parse_duration
from forge.base.logs import LOG_CAP_VAR, parse_size
from forge.errors import ExitCode, ForgeError
from forge.frozen import frozen

DEFAULT_GRACE = 5.0  # seconds between TERM and KILL, for agents and verification lanes
DEFAULT_INFRA_BACKOFF = 5.0

WORKTREES_VAR = "FORGE_WORKTREES"
GRACE_VAR = "FORGE_GRACE"
INFRA_BACKOFF_VAR = "FORGE_INFRA_BACKOFF"


@frozen
class Settings:
    # None: `.forge-worktrees` beside the repository (forge/git/worktree_root.py)
    worktree_root: Path | None = None
    grace: float = DEFAULT_GRACE
    infra_backoff: float = DEFAULT_INFRA_BACKOFF

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, worktree_root: Path | None = None
    ) -> Settings:
        """The settings from the environment; a flag (`--worktree-root`) wins over its
        variable. A bad value is a ForgeError naming the variable (exit 2)."""
        env = os.environ if environ is None else environ
        root = worktree_root if worktree_root is not None else _path(env.get(WORKTREES_VAR))
        if worktree_root is None and root is not None and root.exists() and not root.is_dir():
            raise ForgeError(
                f"{WORKTREES_VAR}={str(root)!r} is not a folder: name a folder for forge's worktrees",
                code=ExitCode.USAGE,
            )
        _size(env, LOG_CAP_VAR)
        return cls(
            worktree_root=root.resolve() if root is not None else None,
            grace=_seconds(env, GRACE_VAR, DEFAULT_GRACE),
            infra_backoff=_seconds(env, INFRA_BACKOFF_VAR, DEFAULT_INFRA_BACKOFF),
        )

    def child_env(self) -> dict[str, str]:
        """What a child forge process (an agent's `forge` call, a hook in a task
        worktree) needs in its environment to see the same worktree root."""
        if self.worktree_root is None:
            return {}
        return {WORKTREES_VAR: str(self.worktree_root)}


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _seconds(env: Mapping[str, str], var: str, default: float) -> float:
    raw = env.get(var, "").strip()
    if not raw:
        return default
    try:
        return 0.0 if _is_zero(raw) else parse_duration(raw)
    except ValueError:
        raise ForgeError(
            f"{var}={raw!r}: expected seconds or a duration (e.g. 5, 0.5 or 500ms)",
            code=ExitCode.USAGE,
        ) from None


def _size(env: Mapping[str, str], var: str) -> None:
    raw = env.get(var, "").strip()
    if not raw:
        return
    try:
        parse_size(raw)
    except ValueError as exc:
        raise ForgeError(f"{var}={raw!r}: {exc}", code=ExitCode.USAGE) from None


def _is_zero(raw: str) -> bool:
    """Zero is a fine grace or backoff (stop at once, retry at once), unlike a timeout."""
    try:
        return float(raw) == 0
    except ValueError:
        return False
