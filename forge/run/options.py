"""What the user asked of a run (`forge run`, `forge retry`, `forge resume`): read by the
runner and the dispatcher alike, so it lives below both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forge.frozen import frozen

if TYPE_CHECKING:
    from forge.plan.repo_config import RepoConfig


@frozen
class RunOptions:
    max_parallel: int | None = None
    retry_failed: int = 0
    infra_retries: int = 3
    only: str | None = None  # `forge retry TASK`: run just this task
    requeued: bool = False  # `--requeue`: `only` goes to the gate as it is, no attempt
    fresh: bool = False
    review: bool = False  # `forge retry TASK --review`: a merged task runs again on a review
    agent: str | None = None  # `forge retry --agent SPEC`
    budget: float | None = None  # USD, `forge run --budget`: overrides the plan's
    verify: bool = True
    sandbox: bool | None = None  # `forge run --sandbox` / `--no-sandbox` (None: not said)
    # forge.toml as the command read it; the run reads it at its start when None, and
    # either way every part of the run uses that one reading (RunContext.repo_config)
    repo_config: RepoConfig | None = None
