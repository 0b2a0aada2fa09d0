"""The DAG: file-pattern overlap, waves, deferrals, critical paths; properties over
random plans with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge.plan.dag import (
    Waves,
    build_graph,
    compute_waves,
    critical_path,
    find_cycle,
    overlap,
    task_overlaps,
    topological_order,
)
from forge.plan.model import Plan, Task
from forge.plan.patterns import covers, out_of_scope, patterns_overlap


def plan_of(
    *tasks: tuple[str, list[str], list[str]], estimates: dict[str, float] | None = None
) -> Plan:
    est = estimates or {}
    return Plan(
        name="p",
        tasks=tuple(
            Task(id=tid, run="true", files=tuple(files), deps=tuple(deps), estimate=est.get(tid))
            for tid, files, deps in tasks
        ),
    )


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("src/app", "src/app/x.py", True),  # a directory covers what is under it
        ("src/app/", "src/app/x.py", True),
        ("src/app", "src/application.py", False),  # by component, not by character
        ("src/app.py", "src/app.py", True),
        ("src/a.py", "src/b.py", False),
        (".", "anything/at/all.py", True),
        ("./", "x", True),
        ("./a//b/", "a/b/c", True),  # normalised first
        ("a/./b", "a/c", False),
        ("src/*.py", "src/x.py", True),
        ("src/*.py", "tests/x.py", False),  # literal leading components differ
        ("src/*.py", "src/sub/deep.py", True),  # `*` may span `/`: conservative
        ("**/*.py", "docs/x.md", True),  # nothing literal to compare
        ("tests/test_a*.py", "tests/test_b.py", False),  # the glob's literal start
        ("tests/test_*.py", "tests/test_b.py", True),
        ("src/ab*", "src/ab", True),
        ("src/abc*", "src/ab", False),
        ("src/a*", "src/ab*", True),
        ("src/a*", "src/b*", False),
        ("docs/[ab].md", "docs/a.md", True),
        ("docs/?.md", "src/x.py", False),
    ],
)
def test_patterns_overlap(a: str, b: str, expected: bool) -> None:
    assert patterns_overlap(a, b) is expected
    assert patterns_overlap(b, a) is expected  # symmetric


def test_overlap_names_the_first_pair() -> None:
    assert overlap(["docs", "src/app"], ["tests", "src/app/x.py"]) == ("src/app", "src/app/x.py")
    assert overlap(["docs"], ["src"]) is None


def test_build_graph_and_order() -> None:
    plan = plan_of(("b", ["b"], ["a"]), ("a", ["a"], []), ("c", ["c"], []))
    graph = build_graph(plan)
    assert set(graph.edges) == {("a", "b")}
    assert graph.nodes["c"]["order"] == 2
    # dependencies first, otherwise plan order
    assert topological_order(plan) == ["a", "b", "c"]


def test_find_cycle_names_it_from_the_first_task() -> None:
    plan = plan_of(("x", ["x"], []), ("b", ["b"], ["c"]), ("c", ["c"], ["a"]), ("a", ["a"], ["b"]))
    assert find_cycle(plan) == ["b", "c", "a", "b"]
    assert find_cycle(plan_of(("a", ["a"], []), ("b", ["b"], ["a"]))) is None


def test_waves_and_deferral_reason() -> None:
    plan = plan_of(
        ("api", ["src/app/"], []),
        ("model", ["src/app/model.py"], []),
        ("docs", ["docs"], []),
        ("route", ["src/routes.py"], ["api"]),
    )
    waves = compute_waves(plan)
    assert waves.waves == (("api", "docs"), ("model", "route"))
    assert waves.deferrals == {"model": "deferred: overlaps `api` on src/app/model.py"}
    assert waves.wave_of == {"api": 0, "docs": 0, "model": 1, "route": 1}


def test_a_dependency_is_not_a_deferral() -> None:
    waves = compute_waves(plan_of(("a", ["x"], []), ("b", ["x"], ["a"])))
    assert waves.waves == (("a",), ("b",))
    assert waves.deferrals == {}


def test_waves_round_trip() -> None:
    waves = compute_waves(plan_of(("a", ["x"], []), ("b", ["x"], [])))
    assert Waves.from_dict(waves.to_dict()) == waves


def test_critical_path_by_count_and_estimate() -> None:
    plan = plan_of(("a", ["a"], []), ("b", ["b"], ["a"]), ("c", ["c"], ["b"]), ("d", ["d"], ["a"]))
    assert critical_path(plan) == {"a": 3, "b": 2, "c": 1, "d": 1}
    heavy = plan_of(
        ("a", ["a"], []),
        ("b", ["b"], ["a"]),
        ("c", ["c"], ["b"]),
        ("d", ["d"], ["a"]),
        estimates={"d": 5},
    )
    assert critical_path(heavy) == {"a": 6, "b": 2, "c": 1, "d": 5}


def test_task_overlaps() -> None:
    plan = plan_of(("a", ["src"], []), ("b", ["src/x.py"], []), ("c", ["docs"], []))
    assert task_overlaps(plan) == {"a": frozenset({"b"}), "b": frozenset({"a"}), "c": frozenset()}


# --- properties ---------------------------------------------------------------------

COMPONENTS = ["src", "app", "tests", "docs", "a.py", "b.md", "*.py", "a*", "**", "x?", "[ab]*"]
pattern_st = st.one_of(
    st.just("."),
    st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=3).map("/".join),
)
concrete_st = st.lists(
    st.sampled_from(["src", "app", "tests", "docs", "a.py", "b.md", "ab", "xy"]),
    min_size=1,
    max_size=4,
).map("/".join)


@settings(max_examples=300, deadline=None)
@given(a=pattern_st, b=pattern_st, path=concrete_st)
def test_overlap_is_sound(a: str, b: str, path: str) -> None:
    """Never claims disjoint when some path is named by both patterns."""
    if covers(a, path) and covers(b, path):
        assert patterns_overlap(a, b)


@settings(max_examples=300, deadline=None)
@given(p=pattern_st, path=concrete_st)
def test_scope_and_overlap_agree(p: str, path: str) -> None:
    """The scope check and the scheduler read a pattern the same way: a path the
    pattern allows changing is a path it overlaps (taken as its exact pattern)."""
    if covers(p, path):
        assert patterns_overlap(p, path)
        assert out_of_scope([p], [path]) == []
    else:
        assert out_of_scope([p], [path]) == [path]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("src", "src/a.py", True),
        ("src", "srcx/a.py", False),
        (".", "any/thing", True),
        ("./src//", "src/a.py", True),
        ("*.py", "src/deep/a.py", True),  # fnmatch's `*` spans `/`
        ("src/*", "src/a/b.md", True),
        ("tests/test_a*", "tests/test_b.py", False),
        ("[ab].py", "a.py", True),
    ],
)
def test_covers(pattern: str, path: str, expected: bool) -> None:
    assert covers(pattern, path) is expected


@st.composite
def random_plans(draw: st.DrawFn) -> Plan:
    n = draw(st.integers(min_value=1, max_value=12))
    tasks = []
    for i in range(n):
        deps = (
            draw(st.lists(st.integers(min_value=0, max_value=max(i - 1, 0)), max_size=3))
            if i
            else []
        )
        files = draw(st.lists(pattern_st, min_size=1, max_size=3))
        tasks.append((f"t{i}", files, sorted({f"t{d}" for d in deps})))
    order = draw(st.permutations(range(n)))  # plan order need not be topological
    return plan_of(*(tasks[i] for i in order))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(plan=random_plans())
def test_wave_invariants(plan: Plan) -> None:
    waves = compute_waves(plan)
    placed = [t for wave in waves.waves for t in wave]
    assert sorted(placed) == sorted(plan.task_ids)  # each task in exactly one wave
    assert all(wave for wave in waves.waves)  # no empty wave
    for t in plan.tasks:
        w = waves.wave_of[t.id]
        assert t.id in waves.waves[w]
        for dep in t.deps:
            assert waves.wave_of[dep] < w  # every dependency in an earlier wave
    for wave in waves.waves:
        for i, a in enumerate(wave):
            for b in wave[i + 1 :]:
                assert overlap(plan.task(a).files, plan.task(b).files) is None
    for tid, reason in waves.deferrals.items():
        earliest = max((waves.wave_of[d] + 1 for d in plan.task(tid).deps), default=0)
        assert waves.wave_of[tid] > earliest and reason.startswith("deferred: overlaps `")
    assert compute_waves(plan) == waves  # deterministic
    assert compute_waves(Plan.from_dict(plan.to_dict())) == waves


@settings(max_examples=100, deadline=None)
@given(plan=random_plans())
def test_critical_path_properties(plan: Plan) -> None:
    cp = critical_path(plan)
    for t in plan.tasks:
        assert cp[t.id] >= 1
        for dep in t.deps:
            assert cp[dep] >= cp[t.id] + 1  # a dependency heads a longer chain
