"""File containment (opt-in: `sandbox = true` in a plan, or `forge run --sandbox`):
a command runs under bubblewrap with the whole file system read-only except its
worktree (or verification checkout), a temp folder of its own at /tmp, and the
agent CLIs' state folders. The network is shared (agents need their API), and so
is the process group (forge stops the group as usual; `--new-session` would take
the command out of it). The command gets its own pid namespace, so nothing it
starts outlives it, daemons included. forge's key (forge/base/seal.py) is hidden.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from forge.base import seal
from forge.errors import ForgeError

HOW_TO_GET = (
    "install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`) "
    "or run without the sandbox"
)
# Where agent CLIs keep their login, settings and session state: they must write there.
# Not ~/.config as a whole: git's own global config lives there.
AGENT_STATE = (
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".aider",
    ".config/claude",
    ".config/gemini",
    ".config/codex",
    ".cache",
    ".npm",
)


@functools.cache
def unavailable() -> str | None:
    """Why the sandbox cannot run here (None: it can)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"the sandbox needs bubblewrap (bwrap), which is not installed: {HOW_TO_GET}"
    try:
        cp = subprocess.run(
            [bwrap, *_BASE, "--", "true"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run here ({exc})"
    if cp.returncode != 0:
        last = (cp.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"bwrap cannot make a sandbox here (user namespaces disabled?): {last}"
    return None


def require() -> None:
    """A one-line refusal when the sandbox was asked for and cannot run."""
    why = unavailable()
    if why is not None:
        raise ForgeError(why)


_BASE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid")


@dataclass(frozen=True)
class Sandbox:
    """What one command may write, and what it must see read-only although it lies
    under the folder the private /tmp covers (the user's repository, in tests)."""

    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()

    def wrap(self, argv: Sequence[str], *, tmp: Path) -> list[str]:
        args = ["bwrap", *_BASE, "--die-with-parent", "--bind", str(tmp), "/tmp"]
        for path in self.readable:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        home = Path.home()
        for name in AGENT_STATE:
            state = home / name
            if state.exists():
                args += ["--bind", str(state), str(state)]
        for path in self.writable:
            if path.exists():
                args += ["--bind", str(path), str(path)]
        keys = seal.key_dir()
        if keys.is_dir():
            args += ["--tmpfs", str(keys)]
        return [*args, "--", *argv]
