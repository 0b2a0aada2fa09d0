"""What the coordinator sends a cluster worker for one attempt, and what comes back.

Plain frozen dataclasses of strings and numbers (the attempt's WorkOrder, its
Outcome, the worker's record of the attempt): they cross process and machine
boundaries pickled, so they carry no paths of the coordinator's machine, no
repository objects and no credentials (agents use the worker's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from forge.run.attempt.context import Outcome
from forge.run.attempt.order import WorkOrder
from forge.run.state.run_state import Attempt

# What the worker's record of an attempt gives the coordinator's as it is (its
# phases are added to the coordinator's; its review's log and its commit are
# taken where they land): an attempt field the worker sets is added here alone.
FROM_WORKER = (
    "feedback_source",
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "models",
    "model_mismatch",
)


@dataclass(frozen=True)
class Job:
    key: str  # unique per attempt: <plan>/<task>/<attempt>/<run nonce>
    order: WorkOrder  # what the attempt's steps do (forge.run.attempt.steps)
    remote: str  # the git remote the worker fetches from and pushes to
    job_ref: str  # refs/forge/jobs/...: the commit the attempt starts from
    result_ref: str  # refs/forge/results/<plan>/<task>/<attempt>
    start: str  # commit id of job_ref
    identity: dict[str, str]  # GIT_AUTHOR_* / GIT_COMMITTER_* of the user
    stop_event: str  # name of the Dask Event that stops every attempt of the run
    grace: float
    tag: str  # FORGE_PROC_TAG of the attempt's processes
    log_cap: int | None = None  # bytes of each command's output kept in its log
    sandbox: bool = False  # the attempt's commands run under bubblewrap


@dataclass(frozen=True)
class JobResult:
    outcome: Outcome | None  # None: the work passed every step; `commit` is to merge
    where: str = ""  # the worker that ran it: host and Dask address
    commit: str | None = None  # pushed to the job's result_ref when set
    attempt: Attempt | None = None  # the worker's record of the attempt, phases and review
    warnings: tuple[str, ...] = ()
    logs: dict[str, str] = field(default_factory=dict)  # file name -> tail of its text
    log: str | None = None  # which of `logs` explains the outcome
    refused: str | None = None  # why this worker cannot run the run's attempts at all

    def onto(self, attempt: Attempt, *, logs: Path) -> None:
        """The worker's record taken into the coordinator's `attempt` (its review's
        log now in the folder `logs`)."""
        mine = self.attempt
        if mine is None:
            return
        attempt.phases.extend(mine.phases)  # the worker's, as they ran
        for name in FROM_WORKER:
            setattr(attempt, name, getattr(mine, name))
        if mine.review is not None:
            attempt.review = replace(mine.review, log=str(logs / "review.log"))
