"""What the coordinator sends a cluster worker for one attempt, and what comes back.

Plain frozen dataclasses of strings and numbers: they cross process and machine
boundaries pickled, so they carry no paths of the coordinator's machine, no
repository objects and no credentials (agents use the worker's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Job:
    key: str  # unique per attempt: <plan>/<task>/<attempt>/<run nonce>
    plan: str
    task: str
    attempt: int
    remote: str  # the git remote the worker fetches from and pushes to
    job_ref: str  # refs/forge/jobs/...: the commit the attempt starts from
    result_ref: str  # refs/forge/results/<plan>/<task>/<attempt>
    start: str  # commit id of job_ref
    base: str  # the task's pinned base: scope and progress are measured against it
    files: tuple[str, ...]
    scope_warn: bool
    message: str  # commit message of the attempt's work
    identity: dict[str, str]  # GIT_AUTHOR_* / GIT_COMMITTER_* of the user
    stop_event: str  # name of the Dask Event that stops every attempt of the run
    timeout: float
    grace: float
    tag: str  # FORGE_PROC_TAG of the attempt's processes
    run: str | None = None  # a shell task's command
    agent: Any | None = None  # (AgentDef, AgentSpec) for a prompt task
    prompt_text: str = ""
    feedback_text: str | None = None
    setup: str | None = None
    check: str | None = None
    clean_all: bool = False
    judged_hash: str | None = None  # the last judged failure's diff hash: "no progress"
    env: tuple[tuple[str, str], ...] = ()  # the plan's `env`, expanded on the worker
    setup_timeout: float | None = None
    log_cap: int | None = None  # bytes of each command's output kept in its log


@dataclass(frozen=True)
class JobResult:
    status: str  # a run Status value
    reason: str = ""
    where: str = ""  # the worker that ran it: host and Dask address
    commit: str | None = None  # pushed to the job's result_ref when set
    diff_hash: str | None = None
    feedback_source: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    infra_kind: str | None = None
    infra_retry_after: float | None = None
    warnings: tuple[str, ...] = ()
    logs: dict[str, str] = field(default_factory=dict)  # file name -> tail of its text
    log: str | None = None  # which of `logs` explains the outcome
    stall: str | None = None  # a run Stall value: FAILED because the work went nowhere
