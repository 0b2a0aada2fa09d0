"""What the coordinator sends a cluster worker for one attempt, and what comes back.

Plain frozen dataclasses of strings and numbers (the attempt's WorkOrder, its
Outcome, the worker's record of the attempt): they cross process and machine
boundaries pickled, so they carry no paths of the coordinator's machine, no
repository objects and no credentials (agents use the worker's own).
"""

from __future__ import annotations

from dataclasses import field, replace
from pathlib import Path

from forge.frozen import frozen
from forge.run.attempt.context import Outcome
from forge.run.attempt.order import WorkOrder
from forge.run.state import events as ev
from forge.run.state.records import Phase
from forge.run.state.run_state import Attempt


@frozen
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


@frozen
class JobResult:
    outcome: Outcome | None  # None: the work passed every step; `commit` is to merge
    where: str = ""  # the worker that ran it: host and Dask address
    commit: str | None = None  # pushed to the job's result_ref when set
    attempt: Attempt | None = None  # the worker's record of the attempt, phases and review
    warnings: tuple[str, ...] = ()
    logs: dict[str, str] = field(default_factory=dict)  # file name -> tail of its text
    log: str | None = None  # which of `logs` explains the outcome
    refused: str | None = None  # why this worker cannot run the run's attempts at all
    phases: tuple[Phase, ...] = ()  # the attempt's phases on the worker

    def said(self, task: str, number: int, *, logs: Path) -> list[ev.Event]:
        """The worker's record, as the events of the coordinator's attempt `number`
        of `task` (its review's log now in the folder `logs`). An attempt field the
        worker sets is said here alone."""
        said: list[ev.Event] = [ev.RanIn(task, number, where=self.where or None)]
        for p in self.phases:  # the worker's, as they ran
            said.append(ev.PhaseStarted(task, number, p.name, p.start))
            if p.end is not None:
                said.append(ev.PhaseEnded(task, number, p.end, p.name))
        mine = self.attempt
        if mine is None:
            return said
        said.append(
            ev.AttemptUsage(task, number, mine.cost_usd, mine.input_tokens, mine.output_tokens)
        )
        models = tuple(mine.models) if mine.models else None
        said.append(ev.ModelsReported(task, number, models, mine.model_mismatch))
        said.append(ev.FeedbackNoted(task, number, source=mine.feedback_source))
        if mine.review is not None:
            review = replace(mine.review, log=str(logs / "review.log"))
            said.append(ev.Reviewed(task, number, review))
        return said
