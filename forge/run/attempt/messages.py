"""What an attempt's steps say when they end it, and what the run says when it ends
a task or pauses: each reason written once, the same on this machine and on a
cluster worker. The run (forge.run) and the gate import them from here; the state
layer below (recovery, reconcile) cannot, and words its few own."""

from __future__ import annotations

STOPPED = "stopped by the user"
SETUP_STOPPED = "stopped during setup"
CHECK_STOPPED = "stopped during the check"
NO_CHANGES = "no changes"
NO_NET_CHANGES = "no changes (the work adds up to nothing against the base)"
NO_SHARED_HISTORY = "its commit shares no history with its base"
NO_PROGRESS = "no progress: the same change as the last failed attempt"
GOES_AGAIN = "the same change goes to the gate again"  # a blame given back, until it lands
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


DISK_FULL = "no space left on the device: the run paused; the next run goes on"


def git_files_put_back(names: list[str], why: str) -> str:
    """The task changed the user's git files (`names`), which forge put back."""
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    said = f"changed your repository's git files while it ran, put back as they were: {shown}"
    return f"{said} ({why})" if why else said


def broken_git(why: object) -> str:
    return f"the task broke its worktree's git directory: {why}"


def no_sandbox(worker: str, why: str) -> str:
    """A worker asked for `sandbox = true` that cannot make one."""
    return f"{worker} cannot run the sandbox: {why}"


# -- the reviewer (forge.run.attempt.review) ------------------------------------

REVIEW_STOPPED = "stopped during the review"
NO_FINDINGS = "rejected without findings"


def reviewed(said: str) -> str:
    """A review that failed the attempt: `said` is its findings' first words, or
    why the reviewer could not judge."""
    return f"review: {said}"


def reviewer_exited(returncode: int | None) -> str:
    return f"reviewer exited {returncode}"


def review_timed_out(limit: float) -> str:
    return f"timed out after {limit:g}s"


# -- what the agent's run says ---------------------------------------------------


def infra(kind: str, message: str) -> str:
    """An infrastructure failure the agent's output (or its reviewer's) tells of."""
    return f"{kind}: {message}"


def strict_model(mismatch: str) -> str:
    return f"model: model mismatch: {mismatch} (strict_model)"


def no_changes_landed(who: str) -> str:
    """No changes, and `who` (landed tasks) last changed the task's files."""
    return f"{NO_CHANGES} (its files were last changed by landed {who}: the change may be there already)"


# -- the run: its dispatcher, its candidates, its runner (forge.run) --------------

FORGE_STOPPED = "forge was stopped"
NOT_EVERY_CANDIDATE = "not every candidate ran"
INTEGRATION_DELETED = "its merge was on an integration branch that has been deleted"


def forge_stopped(exc: BaseException) -> str:
    """Ctrl-C or SystemExit reached the attempt's thread."""
    return f"{FORGE_STOPPED} ({exc!r})"


def forge_error(exc: Exception) -> str:
    return f"forge error: {exc}"


def dependency_not_merged(dep: str, status: object) -> str:
    return f"dependency {dep} did not merge ({status})"


def held(describe: str, resume: str) -> str:
    """The run paused by a hold: what holds it, and the command that lifts it."""
    return f"hold: {describe}; `{resume}` lifts it"


def infra_paused(why: str, what_now: str) -> str:
    return f"infrastructure: {why}; {what_now}"
