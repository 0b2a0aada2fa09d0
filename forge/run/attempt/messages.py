"""What an attempt's steps say when they end it: each reason written once, the
same on this machine and on a cluster worker."""

from __future__ import annotations

STOPPED = "stopped by the user"
SETUP_STOPPED = "stopped during setup"
CHECK_STOPPED = "stopped during the check"
NO_CHANGES = "no changes"
NO_NET_CHANGES = "no changes (the work adds up to nothing against the base)"
NO_SHARED_HISTORY = "its commit shares no history with its base"
NO_PROGRESS = "no progress: the same change as the last failed attempt"
CONTEXT_OVERFLOW = "the prompt overflowed the agent's context window: split the task"


def setup_timed_out(limit: float) -> str:
    return f"setup timed out after {limit:g}s (setup_timeout)"


def setup_failed(line: str) -> str:
    return f"setup failed: {line}"


def timed_out(what: str, limit: float) -> str:
    """`what` is "agent" or "command"."""
    return f"{what} timed out after {limit:g}s"


def exited(what: str, returncode: int, said: str) -> str:
    return f"{what} exited {returncode}: {said}"


def cli_error(said: str) -> str:
    """The run changed nothing and its CLI said why (an API error it exited 0 after)."""
    return f"agent error: {said}"


def binary_missing(missing: str) -> str:
    return f"binary-missing: {missing}"


def out_of_scope(shown: str) -> str:
    return f"changed files outside its declared files: {shown}"


def check_not_run(limit: float) -> str:
    return f"check not run: the attempt's {limit:g}s timeout was used up"


def check_timed_out(limit: float) -> str:
    return f"check timed out (the attempt's {limit:g}s timeout includes the check)"


def check_failed(line: str) -> str:
    return f"check failed: {line}"


def lost(worker: str) -> str:
    """`worker` names the cluster worker that died under the attempt."""
    return f"{worker} lost mid-attempt: the attempt runs again elsewhere"


def broken_git(why: object) -> str:
    return f"the task broke its worktree's git directory: {why}"


def no_sandbox(worker: str, why: str) -> str:
    """A worker asked for `sandbox = true` that cannot make one."""
    return f"{worker} cannot run the sandbox: {why}"
