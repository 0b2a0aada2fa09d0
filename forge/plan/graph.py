"""The plan's DAG as text, for a pull request or docs: Mermaid (which the common
code hosts render) or Graphviz DOT. Tasks grouped by wave, edges dep -> task, and a
dotted `overlap` edge to a task deferred to a later wave by an overlap."""

from __future__ import annotations

import re

from forge.plan.dag import Waves
from forge.plan.model import Plan

FORMATS = ("mermaid", "dot")
_DEFERRED_BY = re.compile(r"`([^`]+)` on ")  # in a deferral: "overlaps `api` on src/app"


def _overlaps(plan: Plan, waves: Waves) -> list[tuple[str, str]]:
    """(other, task): `task` was put in a later wave because it overlaps `other`."""
    ids = {t.id for t in plan.tasks}
    return [
        (other, tid)
        for tid, why in waves.deferrals.items()
        for other in _DEFERRED_BY.findall(why)
        if other in ids and tid in ids
    ]


def _mermaid_label(text: str) -> str:
    # Inside a quoted Mermaid label only `"` needs care; its entity keeps it.
    return text.replace('"', "#quot;")


def mermaid(plan: Plan, waves: Waves) -> str:
    # Node ids are generated: task ids may hold characters Mermaid reads as syntax
    # (`-`, `.`), or be one of its keywords (`end`).
    node = {t.id: f"t{n}" for n, t in enumerate(plan.tasks)}
    kinds = {t.id: "shell" if t.is_shell else "agent" for t in plan.tasks}
    lines = ["flowchart LR"]
    for n, wave in enumerate(waves.waves, start=1):
        lines.append(f'  subgraph w{n}["wave {n}"]')
        lines += [f'    {node[tid]}["{_mermaid_label(tid)}"]' for tid in wave]
        lines.append("  end")
    for t in plan.tasks:
        lines += [f"  {node[d]} --> {node[t.id]}" for d in t.deps if d in node]
    # A deferral by overlap: dotted, so it reads as "waits for", not "depends on".
    lines += [f"  {node[o]} -. overlap .-> {node[t]}" for o, t in _overlaps(plan, waves)]
    shell = [node[tid] for tid, kind in kinds.items() if kind == "shell"]
    if shell:
        lines.append("  classDef shell stroke-dasharray: 4 3")
        lines.append(f"  class {','.join(shell)} shell")
    return "\n".join(lines) + "\n"


def _dot_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(plan: Plan, waves: Waves) -> str:
    shell = {t.id for t in plan.tasks if t.is_shell}
    lines = [f"digraph {_dot_str(plan.name)} {{", "  rankdir=LR;", "  node [shape=box];"]
    for n, wave in enumerate(waves.waves, start=1):
        lines.append(f"  subgraph cluster_wave{n} {{")
        lines.append(f'    label="wave {n}";')
        for tid in wave:
            style = " [style=dashed]" if tid in shell else ""
            lines.append(f"    {_dot_str(tid)}{style};")
        lines.append("  }")
    for t in plan.tasks:
        lines += [f"  {_dot_str(d)} -> {_dot_str(t.id)};" for d in t.deps]
    lines += [
        f'  {_dot_str(o)} -> {_dot_str(t)} [style=dotted, label="overlap"];'
        for o, t in _overlaps(plan, waves)
    ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(plan: Plan, waves: Waves, fmt: str) -> str:
    return mermaid(plan, waves) if fmt == "mermaid" else dot(plan, waves)
