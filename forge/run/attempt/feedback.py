"""What a retry tells the agent: the last failure, its log's tail, the diff it made."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from forge.base import logs, proc
from forge.git.repo import Repository
from forge.plan.model import Task
from forge.run.state import records
from forge.run.state.records import FeedbackSource
from forge.run.state.run_state import FAILURES, TaskState

if TYPE_CHECKING:
    from forge.agents.definition import AgentDef
    from forge.agents.prompt import Feedback

LOG_TAIL_LINES = 40


def for_retry(repo: Repository, ts: TaskState) -> Feedback | None:
    """The feedback for the next attempt, from the last judged failure."""
    from forge.agents import spec as agents

    judged = [a for a in ts.attempts[:-1] if a.status in FAILURES]
    if not judged:
        return None
    last = judged[-1]
    log_tail = failing = ""
    if last.log:
        path = Path(last.log)
        if path.exists():
            log_tail = proc.tail(logs.tail(path), LOG_TAIL_LINES)
            failing = failing_tests(last.feedback_source, path)
        else:
            log_tail = f"(log {last.log} is gone)"
    diff = ""
    if last.commit and ts.base:
        diff = repo.try_git(
            "-c", "core.quotePath=false", "diff", "--stat", ts.base, last.commit
        ).stdout.rstrip()
    return agents.Feedback(
        status=str(last.status),
        reason=last.reason,
        log_tail=log_tail,
        diff_summary=diff or "(no change was made)",
        source=str(last.feedback_source or records.AGENT),
        failing_tests=failing,
    )


def review_file(repo: Repository, plan: str, task: str) -> Path:
    """Where `forge retry TASK --review` leaves a review's comments for the attempt."""
    return repo.state.plan_dir(plan) / "reviews" / f"{task}.md"


def with_review(repo: Repository, plan: str, task: str, fb: Feedback | None) -> Feedback | None:
    """`fb` carrying the review `forge retry --review` left for `task`, if any."""
    from dataclasses import replace

    from forge.agents import spec as agents

    path = review_file(repo, plan, task)
    try:
        said = path.read_text()
    except FileNotFoundError:
        return fb
    if fb is None:
        fb = agents.Feedback(
            status="CHANGES_REQUESTED",
            reason="a review of the pull request asked for changes",
            log_tail="",
            diff_summary="",
            source="host-review",
        )
    return replace(fb, review=said)


FAILING_TESTS_SHOWN = 10


def failing_tests(source: FeedbackSource | None, log: Path) -> str:
    """Each test a failing verification lane's log names, with its output there."""
    from forge.verify.failures import failures_from_log

    if source is None or source.lane is None:
        return ""
    lane = source.lane
    found = [f for f in failures_from_log(lane, logs.tail(log, 4 << 20)) if f.test]
    parts = [f"{f.test}: {f.message}" + (f"\n{f.excerpt}" if f.excerpt else "") for f in found]
    if len(parts) > FAILING_TESTS_SHOWN:
        parts = [*parts[:FAILING_TESTS_SHOWN], f"... and {len(parts) - FAILING_TESTS_SHOWN} more"]
    return "\n\n".join(parts)


def render(fb: Feedback) -> str:
    return (
        f"# Last attempt: {fb.status} ({fb.source})\n\n{fb.reason}\n\n"
        f"## Log tail\n\n{fb.log_tail}\n\n## Its diff\n\n{fb.diff_summary}\n"
    )


def write_prompt(
    defn: AgentDef, path: Path, *, plan: str, task: Task, attempt: int, fb: Feedback | None
) -> None:
    from forge.agents import spec as agents

    text = agents.TaskText(plan, task.id, task.title, task.prompt or "", task.files)
    agents.write_attempt_file(defn, path, text, attempt=attempt, feedback=fb)
