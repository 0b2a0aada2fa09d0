"""Repository-wide settings (`forge.toml` at the repository root) and the
verification config shared by plans, `forge verify` and the hooks."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

DEFAULT_GRACE = 5.0
DEFAULT_RERUNS = 2


@dataclass(frozen=True)
class VerifyConfig:
    """How a commit is verified: named lanes run in parallel, each a shell command.

    A single `verify = "cmd"` is one lane named "verify".
    """

    lanes: tuple[tuple[str, str], ...]  # (lane name, shell command), in declared order
    reruns: int = DEFAULT_RERUNS  # reruns of a failing lane with an unchanged tree
    timeout: float | None = None  # seconds per lane run; None: no limit
    grace: float = DEFAULT_GRACE  # seconds between TERM and KILL when stopping

    def to_dict(self) -> dict[str, Any]:
        return {
            "lanes": [[name, cmd] for name, cmd in self.lanes],
            "reruns": self.reruns,
            "timeout": self.timeout,
            "grace": self.grace,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifyConfig:
        return cls(
            lanes=tuple((str(n), str(c)) for n, c in data["lanes"]),
            reruns=int(data.get("reruns", DEFAULT_RERUNS)),
            timeout=None if data.get("timeout") is None else float(data["timeout"]),
            grace=float(data.get("grace", DEFAULT_GRACE)),
        )

    def fingerprint(self) -> str:
        """Identifies the config for the verdict cache. The grace period is left out:
        it changes how a run is stopped, not what a verdict means."""
        key = {"lanes": self.to_dict()["lanes"], "reruns": self.reruns, "timeout": self.timeout}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
