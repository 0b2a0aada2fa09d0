"""What the coordinator sends a cluster worker for one attempt, and what comes back.

Plain frozen dataclasses of strings and numbers (the attempt's WorkOrder, its
Outcome): they cross process and machine boundaries pickled, so they carry no
paths of the coordinator's machine, no repository objects and no credentials
(agents use the worker's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from forge.run.attempt.context import Outcome
from forge.run.attempt.order import WorkOrder


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
    diff_hash: str | None = None
    feedback_source: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    models: tuple[str, ...] = ()  # the models the agent's CLI reported it used
    model_mismatch: str | None = None
    warnings: tuple[str, ...] = ()
    logs: dict[str, str] = field(default_factory=dict)  # file name -> tail of its text
    log: str | None = None  # which of `logs` explains the outcome
    review: dict[str, object] | None = None  # the attempt's review record, when it had one
    refused: str | None = None  # why this worker cannot run the run's attempts at all
    # The attempt's phases on the worker ({"name", "start", "end"}, epoch seconds).
    phases: tuple[dict[str, object], ...] = ()
