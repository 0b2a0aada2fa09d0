"""The escalation policy, exhaustively and without processes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge.agents.escalation import (
    Decision,
    Ladder,
    Outcome,
    next_step,
    split_suggestion,
    streak,
)

MODELS = ("small", "medium", "large")
EFFORTS = ("low", "high")


def o(status: str, model: str | None = "small", effort: str | None = "low") -> Outcome:
    return Outcome(model, effort, status)


def step(
    history: Sequence[Outcome],
    model: str | None = "small",
    effort: str | None = "low",
    *,
    after: int = 3,
    effort_up: bool = True,
    models: Sequence[str] = MODELS,
    efforts: Sequence[str] = EFFORTS,
) -> Decision:
    return next_step(history, Ladder(models, efforts, after, effort_up), model=model, effort=effort)


F, T, M, C, INF, X, N = (
    "FAILED",
    "TIMEOUT",
    "MERGED",
    "CONFLICT",
    "INFRA",
    "INTERRUPTED",
    "NO_PROGRESS",
)


@pytest.mark.parametrize(
    ("statuses", "action"),
    [
        ([], "same"),
        ([F], "same"),
        ([F, F], "same"),
        ([F, F, F], "model"),
        ([F, T, F], "model"),  # a timeout is a failure too
        ([T, T, T], "model"),
        ([F, F, M, F], "same"),  # a pass ends the streak
        ([F, F, M, F, F, F], "model"),
        ([F, INF, F, X, F], "model"),  # INFRA / INTERRUPTED neither count nor break
        ([INF, INF, INF, INF], "same"),
        ([X, X, X], "same"),
        ([F, C, F], "same"),  # CONFLICT is neutral
        ([F, C, F, C, F], "model"),
        ([C, C, C, C], "same"),
        ([F, F, N], "stop"),  # no progress: no automatic retry
        ([N, INF], "stop"),
        ([N, F], "same"),  # a later attempt (a manual retry) moves on
        ([F, F, F, INF, INF], "model"),
    ],
)
def test_streak_table(statuses: list[str], action: str) -> None:
    assert step([o(s) for s in statuses]).action == action


@pytest.mark.parametrize(
    ("model", "effort", "effort_up", "want"),
    [
        ("small", "low", True, ("model", "medium", "low")),
        ("medium", "low", True, ("model", "large", "low")),
        ("large", "low", True, ("effort", "large", "high")),
        ("large", "low", False, ("split", "large", "low")),
        ("large", "high", True, ("split", "large", "high")),
        ("medium", "high", True, ("model", "large", "high")),  # effort is kept on a model step
    ],
)
def test_ladder_table(model: str, effort: str, effort_up: bool, want: tuple[str, str, str]) -> None:
    history = [o(F, model, effort)] * 3
    d = step(history, model, effort, effort_up=effort_up)
    assert (d.action, d.model, d.effort) == want
    assert d.reason


def test_another_model_or_effort_ends_the_streak() -> None:
    history = [o(F, "small"), o(F, "small"), o(F, "medium")]
    assert step(history, "medium").action == "same"
    assert step(history, "small").action == "same"  # the medium attempt broke small's streak
    mixed = [o(F, "small", "low"), o(F, "small", "high"), o(F, "small", "low")]
    assert step(mixed, "small", "low").action == "same"
    assert streak(mixed, model="small", effort="low") == 1


def test_a_changed_spec_starts_from_zero() -> None:
    # `forge retry --agent x:large` after three failures on small: large has no streak yet.
    history = [o(F, "small")] * 3
    d = step(history, "large")
    assert (d.action, d.model, d.effort) == ("same", "large", "low")


def test_escalation_off() -> None:
    history = [o(F)] * 50
    d = step(history, after=0)
    assert (d.action, d.model, d.effort) == ("same", "small", "low")
    assert "escalate_after = 0" in d.reason
    assert step([*history, o(N)], after=0).action == "stop"


def test_escalate_after_one() -> None:
    assert step([o(F)], after=1).action == "model"


def test_empty_or_unknown_ladders() -> None:
    # No models (a custom agent without a ladder): straight to efforts.
    d = step([o(F, None, "low")] * 3, None, "low", models=())
    assert (d.action, d.model, d.effort) == ("effort", None, "high")
    # Nothing at all to climb: split.
    d = step([o(F, None, None)] * 3, None, None, models=(), efforts=())
    assert d.action == "split"
    # A model off the ladder counts as the top: never a step "up" to a guess.
    d = step([o(F, "custom-xl")] * 3, "custom-xl")
    assert (d.action, d.model, d.effort) == ("effort", "custom-xl", "high")


def test_no_progress_keeps_the_next_spec_for_a_manual_retry() -> None:
    d = step([o(F), o(F), o(N)])
    assert d.action == "stop" and "no progress" in d.reason
    assert (d.model, d.effort) == ("medium", "low")  # three failures: a manual retry moves up
    # A full streak with nothing left is a split even when the last made no progress.
    top = [o(F, "large", "high"), o(F, "large", "high"), o(N, "large", "high")]
    assert step(top, "large", "high").action == "split"


def test_split_suggestion_says_what_was_tried() -> None:
    history = (
        [o(F, "small", "low")] * 3
        + [o(INF, "medium", "low")]
        + [o(F, "medium", "low"), o(T, "medium", "low"), o(F, "medium", "low")]
        + [o(F, "large", "low")] * 3
        + [o(F, "large", "high"), o(F, "large", "high"), o(N, "large", "high")]
    )
    assert step(history, "large", "high").action == "split"
    text = split_suggestion("route", history, replan="then run `forge plan p.toml` again.")
    assert "route" in text and "12 attempts" in text
    for part in ("small/low x3", "medium/low x3", "large/low x3", "large/high x3"):
        assert part in text
    assert "Split it into smaller tasks" in text and "\n" not in text
    assert "1 attempt (" in split_suggestion("t", [o(F)], replan="")


# --- properties ----------------------------------------------------------------

STATUSES = (F, T, M, C, INF, X, N)
statuses = st.sampled_from(STATUSES)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Outcome], str, str]:
    """A random history on random rungs, and a current rung."""
    rung = st.tuples(st.sampled_from(MODELS), st.sampled_from(EFFORTS))
    items = draw(st.lists(st.tuples(rung, statuses), max_size=25))
    model, effort = draw(rung)
    return [Outcome(m, e, s) for (m, e), s in items], model, effort


@settings(max_examples=400, deadline=None)
@given(histories(), st.integers(0, 5), st.booleans())
def test_never_escalates_before_a_full_streak(
    case: tuple[list[Outcome], str, str], after: int, effort_up: bool
) -> None:
    history, model, effort = case
    d = step(history, model, effort, after=after, effort_up=effort_up)
    if d.action in ("model", "effort", "split"):
        assert after > 0
        counted = [h for h in history if h.status not in ("INFRA", "INTERRUPTED", "CONFLICT")]
        last = counted[-after:]
        assert len(last) == after
        assert all(h.status in (F, T, N) and (h.model, h.effort) == (model, effort) for h in last)


@settings(max_examples=400, deadline=None)
@given(histories(), st.integers(0, 5), st.booleans())
def test_never_goes_down_the_ladder(
    case: tuple[list[Outcome], str, str], after: int, effort_up: bool
) -> None:
    history, model, effort = case
    d = step(history, model, effort, after=after, effort_up=effort_up)
    assert d.model is not None and d.effort is not None
    assert MODELS.index(d.model) >= MODELS.index(model)
    assert EFFORTS.index(d.effort) >= EFFORTS.index(effort)
    # One rung at a time: a model step keeps the effort, an effort step the model.
    if d.action == "model":
        assert MODELS.index(d.model) == MODELS.index(model) + 1 and d.effort == effort
    if d.action == "effort":
        assert model == MODELS[-1] and EFFORTS.index(d.effort) == EFFORTS.index(effort) + 1
    if d.action in ("same", "split"):
        assert (d.model, d.effort) == (model, effort)


@settings(max_examples=400, deadline=None)
@given(
    histories(),
    st.lists(st.tuples(st.integers(0, 30), st.sampled_from((INF, X, C))), max_size=6),
    st.integers(0, 5),
    st.booleans(),
)
def test_neutral_attempts_change_nothing(
    case: tuple[list[Outcome], str, str],
    inserts: list[tuple[int, str]],
    after: int,
    effort_up: bool,
) -> None:
    history, model, effort = case
    noisy = list(history)
    for at, status in inserts:
        noisy.insert(min(at, len(noisy)), Outcome("medium", "high", status))
    assert step(noisy, model, effort, after=after, effort_up=effort_up) == step(
        history, model, effort, after=after, effort_up=effort_up
    )


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 4),
    st.booleans(),
    st.lists(st.sampled_from((F, T, INF, X, C)), min_size=1, max_size=8),
)
def test_always_failing_ends_in_a_split(
    n_models: int, n_efforts: int, after: int, effort_up: bool, pattern: list[str]
) -> None:
    """Follow the decisions of a task that never passes: it climbs one rung at a
    time and ends in a split within len(models) * len(efforts) * after failures."""
    models = [f"m{i}" for i in range(n_models)]
    efforts = [f"e{i}" for i in range(n_efforts)]
    if F not in pattern and T not in pattern:
        pattern = [*pattern, F]
    model, effort = models[0], efforts[0]
    history: list[Outcome] = []
    failures = 0
    for i in range(10_000):
        d = step(
            history, model, effort, after=after, effort_up=effort_up, models=models, efforts=efforts
        )
        if d.action == "split":
            break
        assert d.action in ("same", "model", "effort")
        model, effort = d.model or model, d.effort or effort
        status = pattern[i % len(pattern)]
        history.append(Outcome(model, effort, status))
        failures += status in (F, T)
    else:
        pytest.fail("never split")
    assert failures <= n_models * n_efforts * after
    rungs = n_models + (n_efforts - 1 if effort_up else 0)
    assert failures == rungs * after
    assert model == models[-1]
    assert effort == (efforts[-1] if effort_up else efforts[0])
