"""The overlap index of task_overlaps finds exactly the pairs that comparing every
pair finds (a plan of 1000 tasks cannot afford the pairs)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from forge.plan.dag import overlap, task_overlaps
from forge.plan.model import Plan, Task

COMPONENTS = ["src", "app", "tests", "a.py", "b.md", "*.py", "a*", "**", "x?", "[ab]"]
pattern_st = st.one_of(
    st.just("."),
    st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=3).map("/".join),
)


@settings(max_examples=300, deadline=None)
@given(files=st.lists(st.lists(pattern_st, min_size=1, max_size=3), min_size=1, max_size=12))
def test_index_matches_every_pair(files: list[list[str]]) -> None:
    plan = Plan(
        name="p",
        tasks=tuple(Task(id=f"t{i}", run="true", files=tuple(f)) for i, f in enumerate(files)),
    )
    brute = {
        a.id: frozenset(b.id for b in plan.tasks if b.id != a.id and overlap(a.files, b.files))
        for a in plan.tasks
    }
    assert task_overlaps(plan) == brute
