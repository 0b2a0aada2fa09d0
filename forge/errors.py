"""The errors forge raises and the exit codes of the contract (SPEC.md, "Exit codes")."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    USAGE = 2  # usage, bad input, or refused (another process holds the plan): nothing changed
    SPLIT = 3  # escalation exhausted: the task should be split
    FAILED = 5  # a task or the verification failed
    PAUSED = 8  # a hold is in force, or the agents' infrastructure stopped the run
    INTERRUPTED = 130  # stopped by the user


class ForgeError(Exception):
    """An error a person can act on: one line of message, one exit code, no traceback."""

    code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, code: ExitCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class PlanError(ForgeError):
    """An invalid plan: every problem found, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class Busy(ForgeError):
    """Another forge process holds what this one needs (a plan lock)."""


class Interrupted(ForgeError):
    """The user stopped forge (SIGINT/SIGTERM)."""

    code = ExitCode.INTERRUPTED


class StateError(ForgeError):
    """A state file forge cannot read: named, with how to recover, and never overwritten."""
