"""Escalation: a pure function from a task's attempt history and its agent's
ladders to what the next attempt should be. No I/O, no processes.

The policy (SPEC.md "Agents"):

- `escalate_after` failed attempts in a row on the current model and effort
  move the next attempt to the next model of the ladder; at the top of the
  ladder, with `escalate_effort`, to the next effort. `escalate_after = 0`
  turns escalation off.
- FAILED, TIMEOUT and NO_PROGRESS extend the streak. A pass (MERGED), or an
  attempt on another model or effort, ends it.
- INFRA and INTERRUPTED are neither failures nor breaks: the agent never had
  a fair go. CONFLICT is neutral too: a merge conflict comes from what other
  tasks merged meanwhile, not from a model too weak for the task.
- When the streak is full and nothing stronger is left: split, with a
  suggestion saying what was tried.
- NO_PROGRESS (a retry byte-identical to the failed one before it): stop, no
  automatic retry; the decision still names the model and effort a manual
  retry should use. A full streak with nothing left is a split even then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from forge.frozen import frozen

# A FAILED attempt that changed exactly what the judged attempt before it did (the
# run layer records it as a stall and reports it here under this status).
NO_PROGRESS = "NO_PROGRESS"
FAILURES = frozenset({"FAILED", "TIMEOUT", NO_PROGRESS})
NEUTRAL = frozenset({"INFRA", "INTERRUPTED", "CONFLICT"})

Action = Literal["same", "model", "effort", "split", "stop"]


@frozen
class Outcome:
    """One finished attempt: the model and effort it ran with, and its status."""

    model: str | None
    effort: str | None
    status: str  # FAILED, TIMEOUT, CONFLICT, INFRA, INTERRUPTED, MERGED, NO_PROGRESS


@frozen
class Ladder:
    """What an attempt can escalate to: the agent's models and efforts, weakest
    first, and the plan's policy (`escalate_after`, `escalate_effort`)."""

    models: Sequence[str]
    efforts: Sequence[str]
    escalate_after: int
    escalate_effort: bool


@frozen
class Decision:
    action: Action
    model: str | None  # for the next attempt (for split: the current ones)
    effort: str | None
    reason: str


def _label(model: str | None, effort: str | None) -> str:
    return f"{model or 'default model'}/{effort or 'default effort'}"


def _counted(history: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in history if o.status not in NEUTRAL]


def streak(history: Sequence[Outcome], *, model: str | None, effort: str | None) -> int:
    """Failed attempts in a row, most recent last, on exactly this model and effort."""
    count = 0
    for outcome in reversed(_counted(history)):
        if outcome.status not in FAILURES or (outcome.model, outcome.effort) != (model, effort):
            break
        count += 1
    return count


def _step_up(ladder: Sequence[str], current: str | None) -> str | None:
    """The next rung, or None at the top. A value off the ladder (or none) counts
    as the top: forge cannot tell what is stronger than a model it does not know."""
    rungs = list(ladder)
    if current is not None and current in rungs:
        i = rungs.index(current)
        if i + 1 < len(rungs):
            return rungs[i + 1]
    return None


def next_step(
    history: Sequence[Outcome],
    ladder: Ladder,
    *,
    model: str | None,
    effort: str | None,
    retry: str = "forge retry TASK",
) -> Decision:
    """What the next attempt should run with, given the attempts so far (oldest
    first) and the current `model`/`effort` (the task's spec). `retry` is the
    command that runs the task again, as a person types it."""
    counted = _counted(history)
    no_progress = bool(counted) and counted[-1].status == NO_PROGRESS
    decision = _escalate(history, ladder, model=model, effort=effort)
    if no_progress and decision.action != "split":
        return Decision(
            "stop",
            decision.model,
            decision.effort,
            "no progress: the last retry changed exactly what the failed attempt before it "
            f"did; not retried automatically (`{retry}` runs it again)",
        )
    return decision


def _escalate(
    history: Sequence[Outcome], ladder: Ladder, *, model: str | None, effort: str | None
) -> Decision:
    escalate_after, escalate_effort = ladder.escalate_after, ladder.escalate_effort
    here = _label(model, effort)
    if escalate_after <= 0:
        return Decision("same", model, effort, "escalation is off (escalate_after = 0)")
    failed = streak(history, model=model, effort=effort)
    if failed < escalate_after:
        return Decision(
            "same", model, effort, f"{failed} of {escalate_after} failed attempts on {here}"
        )
    full = f"{failed} failed attempts in a row on {here}"
    stronger_model = _step_up(ladder.models, model)
    if stronger_model is not None:
        return Decision("model", stronger_model, effort, f"{full}: next model {stronger_model}")
    if escalate_effort:
        stronger_effort = _step_up(ladder.efforts, effort)
        if stronger_effort is not None:
            return Decision(
                "effort",
                model,
                stronger_effort,
                f"{full}: top model, next effort {stronger_effort}",
            )
    left = "model or effort" if escalate_effort else "model (escalate_effort is off)"
    return Decision("split", model, effort, f"{full}, and no stronger {left} is left")


def split_suggestion(task_id: str, history: Sequence[Outcome], *, replan: str) -> str:
    """A suggestion to split the task, saying what was tried; `replan` says how the
    split is recorded (`then run ... again.`)."""
    tried: dict[tuple[str | None, str | None], int] = {}
    for outcome in history:
        if outcome.status in FAILURES:
            key = (outcome.model, outcome.effort)
            tried[key] = tried.get(key, 0) + 1
    total = sum(tried.values())
    what = (
        ", ".join(f"{_label(m, e)} x{n}" for (m, e), n in tried.items())
        or "no failed attempts recorded"
    )
    return (
        f"Task {task_id} failed {total} attempt{'s' if total != 1 else ''} ({what}) and nothing "
        f"stronger is left to try. Split it into smaller tasks, each with fewer files and a "
        f"narrower prompt, {replan}"
    )
