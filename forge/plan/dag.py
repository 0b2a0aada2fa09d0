"""The plan as a DAG: cycles, overlap of file patterns, waves, critical paths.

Two tasks overlap when their `files` patterns can name a common path
(`forge.plan.patterns.patterns_overlap`: the same reading the scope check uses).

Waves are a view for people and a priority hint for the scheduler, not a barrier:
the scheduler may start a task as soon as its dependencies merged and it overlaps
nothing running (`task_overlaps`).

networkx is imported inside the functions that need it, so importing this module
(for `Waves`) costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from forge.base.files import JsonObject
from forge.frozen import frozen
from forge.plan.model import Plan
from forge.plan.patterns import is_glob, normalize_pattern, patterns_overlap

if TYPE_CHECKING:
    import networkx as nx


def overlap(files_a: Iterable[str], files_b: Iterable[str]) -> tuple[str, str] | None:
    """The first pair (a, b) of overlapping patterns, or None when disjoint."""
    bs = list(files_b)
    for a in files_a:
        for b in bs:
            if patterns_overlap(a, b):
                return a, b
    return None


def _pair_text(pair: tuple[str, str]) -> str:
    a, b = pair
    if a == b:
        return a
    # The longer of two nested paths says more precisely where the clash is.
    if not (is_glob(a) or is_glob(b)):
        return a if len(a) >= len(b) else b
    return f"{a} ~ {b}"


def find_cycle_in(deps: Mapping[str, Iterable[str]], order: Mapping[str, int]) -> list[str] | None:
    """A dependency cycle as [a, b, ..., a] where a depends on b, starting from the
    cycle's earliest task in plan order; None when there is none. Deterministic:
    the search starts from tasks, and follows dependencies, in plan order."""
    import networkx as nx

    def rank(tid: str) -> int:
        return order.get(tid, 0)

    tasks = sorted(deps, key=rank)
    graph = nx.DiGraph()  # task -> each of its dependencies (not dep -> task)
    graph.add_nodes_from(tasks)
    for tid in tasks:
        graph.add_edges_from((tid, d) for d in sorted(set(deps[tid]), key=rank) if d in deps)
    try:
        edges = nx.find_cycle(graph, source=tasks)
    except nx.NetworkXNoCycle:
        return None
    cycle = [tail for tail, _head in edges]
    first = min(range(len(cycle)), key=lambda i: rank(cycle[i]))
    cycle = cycle[first:] + cycle[:first]
    return [*cycle, cycle[0]]


def find_cycle(plan: Plan) -> list[str] | None:
    order = {t.id: n for n, t in enumerate(plan.tasks)}
    return find_cycle_in({t.id: t.deps for t in plan.tasks}, order)


def build_graph(plan: Plan) -> nx.DiGraph:
    """Nodes are task ids (attribute `order`: the index in the plan), edges dep -> task."""
    import networkx as nx

    graph = nx.DiGraph()
    for n, t in enumerate(plan.tasks):
        graph.add_node(t.id, order=n)
    ids = set(plan.task_ids)
    for t in plan.tasks:
        for dep in t.deps:
            if dep in ids:
                graph.add_edge(dep, t.id)
    return graph


def topological_order(plan: Plan, graph: nx.DiGraph | None = None) -> list[str]:
    """Dependencies first; ties broken by plan order (so the result is stable)."""
    import networkx as nx

    graph = build_graph(plan) if graph is None else graph
    order: dict[str, int] = {t.id: n for n, t in enumerate(plan.tasks)}
    return list(nx.lexicographical_topological_sort(graph, key=order.__getitem__))


@frozen
class Waves:
    """Waves of tasks, each wave file-disjoint, each after its tasks' dependencies.

    `wave_of` maps a task id to its 0-based index in `waves` (shown to people as
    1-based). `deferrals` holds, for each task moved past the earliest wave its
    dependencies allow, why ("deferred: overlaps `api` on src/app").
    """

    waves: tuple[tuple[str, ...], ...]
    deferrals: Mapping[str, str] = field(default_factory=dict)
    wave_of: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        return {"waves": [list(w) for w in self.waves], "deferrals": dict(self.deferrals)}

    @classmethod
    def from_dict(cls, data: JsonObject) -> Waves:
        return cls.of(tuple(tuple(w) for w in data["waves"]), dict(data.get("deferrals", {})))

    @classmethod
    def of(cls, waves: tuple[tuple[str, ...], ...], deferrals: Mapping[str, str]) -> Waves:
        wave_of = {t: n for n, wave in enumerate(waves) for t in wave}
        return cls(waves=waves, deferrals=dict(deferrals), wave_of=wave_of)


def _dispatch_order(plan: Plan) -> list[str]:
    """Dependencies first; among tasks free to go, the order the scheduler starts
    them: the longest critical path first, ties in plan order."""
    import networkx as nx

    cp = critical_path(plan)
    order = {t.id: n for n, t in enumerate(plan.tasks)}
    return list(
        nx.lexicographical_topological_sort(build_graph(plan), key=lambda t: (-cp[t], order[t]))
    )


def compute_waves(plan: Plan) -> Waves:
    """Each task, in the order the scheduler would start it, goes into the first
    wave after its dependencies' waves in which it overlaps no task already placed.
    So of two overlapping tasks the deferred one is the one that really waits."""
    tasks = {t.id: t for t in plan.tasks}
    overlaps = task_overlaps(plan)
    placed: list[list[str]] = []
    wave_of: dict[str, int] = {}
    deferrals: dict[str, str] = {}
    for tid in _dispatch_order(plan):
        task = tasks[tid]
        earliest = max((wave_of[d] + 1 for d in task.deps if d in wave_of), default=0)
        # The waves its overlapping tasks already hold: O(its overlaps), not O(wave).
        taken = {wave_of[o] for o in overlaps[tid] if o in wave_of}
        w = earliest
        while w in taken:
            w += 1
        if w == len(placed):
            placed.append([])
        placed[w].append(tid)
        wave_of[tid] = w
        if w > earliest:
            # Name one clash in each wave the task had to skip.
            clashes: list[str] = []
            for skipped in placed[earliest:w]:
                for other in skipped:
                    pair = overlap(task.files, tasks[other].files)
                    if pair:
                        clashes.append(f"`{other}` on {_pair_text(pair)}")
                        break
            deferrals[tid] = "deferred: overlaps " + "; ".join(clashes)
    return Waves.of(tuple(tuple(w) for w in placed), deferrals)


def critical_path(plan: Plan) -> dict[str, float]:
    """For each task, the longest chain of dependants starting at it (itself
    included), weighing each task by its `estimate` (1 when unset)."""
    graph = build_graph(plan)
    weight = {t.id: (t.estimate if t.estimate is not None else 1.0) for t in plan.tasks}
    length: dict[str, float] = {}
    for tid in reversed(topological_order(plan, graph)):
        length[tid] = weight[tid] + max((length[d] for d in graph.successors(tid)), default=0.0)
    return {t.id: length[t.id] for t in plan.tasks}


def task_overlaps(plan: Plan) -> dict[str, frozenset[str]]:
    """For each task, the other tasks whose files overlap its own: they must never
    run at the same time.

    Not every pair is compared (a plan of 1000 tasks has half a million): two
    patterns can only overlap when the literal components before their first glob
    are one a leading part of the other, so patterns are filed in a tree by those
    components and each is compared with those on its path and under its node.
    """
    root = _Node()
    literal: dict[tuple[str, str], list[str]] = {}
    for t in plan.tasks:
        for pattern in t.files:
            parts = _literal_prefix(pattern)
            literal[(t.id, pattern)] = parts
            node = root
            for part in parts:
                node = node.children.setdefault(part, _Node())
            node.here.append((t.id, pattern))
    out: dict[str, set[str]] = {t.id: set() for t in plan.tasks}
    for (tid, pattern), parts in literal.items():
        at: _Node | None = root
        candidates = list(root.here)
        for part in parts:
            at = at.children.get(part) if at is not None else None
            if at is None:
                break
            candidates += at.here
        if at is not None:
            candidates += [entry for child in at.children.values() for entry in child.all()]
        for other, other_pattern in candidates:
            if other != tid and other not in out[tid] and patterns_overlap(pattern, other_pattern):
                out[tid].add(other)
                out[other].add(tid)
    return {k: frozenset(v) for k, v in out.items()}


@dataclass
class _Node:
    here: list[tuple[str, str]] = field(default_factory=list)  # (task, pattern) filed here
    children: dict[str, _Node] = field(default_factory=dict)

    def all(self) -> Iterator[tuple[str, str]]:
        stack = [self]
        while stack:
            node = stack.pop()
            yield from node.here
            stack.extend(node.children.values())


def _literal_prefix(pattern: str) -> list[str]:
    """The components before the first one holding a glob character."""
    norm = normalize_pattern(pattern)
    out = []
    for part in [] if norm == "." else norm.split("/"):
        if is_glob(part):
            break
        out.append(part)
    return out
