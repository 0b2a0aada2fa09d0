"""What `forge status` reads of a recorded plan's JSON: its tasks, budget, source,
base and combined heads; a record it cannot read is named with the problem Python's
own reading of it (`record["plan"]["tasks"][i]["id"]`) would have met."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.commands.status_rows import plan_record
from forge.errors import StateError

FILE = Path("/repo/.git/forge/plans/p/plan.json")


def test_a_recorded_plan_reads_as_written() -> None:
    data = {
        "plan": {"tasks": [{"id": "a"}, {"id": 2}], "budget": 20},
        "source_path": "/x/plan.toml",
        "base_commit": "1a2b3c",
        "combined": {"p": "ab12", "q": "cd34"},
    }
    got = plan_record(data, FILE)
    assert got.task_ids == ["a", "2"]
    assert got.budget == 20 and isinstance(got.budget, int)  # as written: the JSON is the same
    assert (got.source, got.base) == ("/x/plan.toml", "1a2b3c")
    assert got.combined == {"p": "ab12", "q": "cd34"}
    bare = plan_record({"plan": {"tasks": []}}, FILE)
    assert (bare.budget, bare.source, bare.base, bare.combined) == (None, None, None, {})


def _python_says(data: object) -> str:
    try:
        [str(t["id"]) for t in data["plan"]["tasks"]]  # type: ignore[index]
    except (KeyError, TypeError) as exc:
        return repr(exc)
    raise AssertionError(f"{data!r} reads")


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        "text",
        {},
        {"plan": None},
        {"plan": [1]},
        {"plan": "s"},
        {"plan": 3.5},
        {"plan": {}},
        {"plan": {"tasks": 5}},
        {"plan": {"tasks": None}},
        {"plan": {"tasks": ["a"]}},
        {"plan": {"tasks": [{"name": "a"}]}},
        {"plan": {"tasks": [[1]]}},
        {"plan": {"tasks": [True]}},
    ],
)
def test_a_record_in_another_form_is_named_with_its_problem(data: object) -> None:
    with pytest.raises(StateError) as caught:
        plan_record(data, FILE)
    assert str(caught.value) == (
        f"recorded plan {FILE} is not in a form this forge understands "
        f"({_python_says(data)}); run `forge plan` on its file again"
    )
