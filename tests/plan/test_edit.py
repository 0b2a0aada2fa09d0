"""Cutting tasks out of a plan file by its text: what moves is exactly what was
meant, and the comments go with their tasks (properties over random plan files)."""

from __future__ import annotations

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from forge.plan.edit import split_text


@st.composite
def plan_files(draw: st.DrawFn) -> tuple[str, list[str]]:
    n = draw(st.integers(min_value=2, max_value=6))
    lines = ['name = "p"', "# top comment", "max_parallel = 2", ""]
    for i in range(n):
        if draw(st.booleans()):
            lines.append(f"# about t{i}")
        lines += ["[[task]]", f'id = "t{i}"', f'files = ["t{i}.txt"]']
        if i and draw(st.booleans()):
            deps = draw(st.lists(st.integers(0, i - 1), unique=True, min_size=1))
            lines += ["deps = ["] + [f'  "t{d}",' for d in deps] + ["]"]
        lines += [f'run = "echo {i}"  # inline comment', ""]
    if draw(st.booleans()):
        lines += ["[verify]", 'command = "true"']
    moved = draw(st.lists(st.sampled_from([f"t{i}" for i in range(n)]), unique=True, min_size=1))
    return "\n".join(lines) + "\n", moved


@settings(max_examples=60, deadline=None)
@given(plan_files())
def test_split_text_moves_exactly_the_tasks_asked_for(case: tuple[str, list[str]]) -> None:
    text, moved = case
    before = tomllib.loads(text)
    old, new = split_text(
        text, moved, new_name="q", new_base="abc", base_note="from p", new_deps={}
    )
    o, n = tomllib.loads(old), tomllib.loads(new)
    assert [t["id"] for t in o.get("task", [])] == [
        t["id"] for t in before["task"] if t["id"] not in moved
    ]
    assert [t["id"] for t in n["task"]] == [t["id"] for t in before["task"] if t["id"] in moved]
    assert all(t.get("deps", []) == [] for t in n["task"])
    assert n["name"] == "q" and n["base"] == "abc" and n["max_parallel"] == 2
    assert n.get("verify") == before.get("verify") == o.get("verify")
    assert "# top comment" in old
    for tid in moved:
        if f"# about {tid}\n" in text:
            assert f"# about {tid}\n" in new and f"# about {tid}\n" not in old
