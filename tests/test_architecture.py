"""The dependency rule, over the real import graph of the package.

Every `import` and `from ... import` in every module under forge/ counts: module
level, inside functions, and under `if TYPE_CHECKING:` (a cycle there is a cycle in
the design). Imports go only down the layers; `forge.errors` is importable from
anywhere; within one layer any import is fine as long as the graph has no cycle.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "forge"
# Top to bottom: a module may import from its own layer and the layers below it.
LAYERS = ("cli", "commands", "hooks", "cluster", "run", "verify", "plan", "agents", "git", "base")
TOP = {"forge", "forge.cli", "forge.__main__"}  # the entry points sit with cli
ANYWHERE = "forge.errors"


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.where}: {self.source} -> {self.target}"


def module_names() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module that `name` (a module, or a name inside one) lives in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports() -> list[Import]:
    modules = module_names()
    found: list[Import] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        rel = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                mod = _absolute(node, module, path.name == "__init__.py")
                # `from forge import x` and `from forge.run import runner` import modules.
                targets = [
                    f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names
                ]
            for target in targets:
                owner = _owner(target, modules) if target.startswith("forge") else None
                if owner and owner != module:
                    found.append(Import(module, owner, f"{rel}:{node.lineno}"))
    return list(dict.fromkeys(found))


def layer(module: str) -> int | None:
    """The index in LAYERS (0 is the top); None for forge.errors."""
    if module == ANYWHERE:
        return None
    if module in TOP:
        return 0
    return LAYERS.index(module.split(".")[1])


def test_every_module_belongs_to_a_layer() -> None:
    strays = [
        m
        for m in module_names()
        if m not in TOP and m != ANYWHERE and m.split(".")[1] not in LAYERS
    ]
    assert not strays, f"modules outside every layer (add a layer or move them): {strays}"


def test_the_import_graph_has_no_cycle() -> None:
    found = imports()
    graph = nx.DiGraph()
    graph.add_edges_from((i.source, i.target) for i in found)
    cycles = list(nx.simple_cycles(graph))
    lines = []
    for cycle in cycles:
        edges = set(zip(cycle, [*cycle[1:], cycle[0]], strict=True))
        lines.append(" -> ".join([*cycle, cycle[0]]))
        lines += [f"    {i}" for i in found if (i.source, i.target) in edges]
    print("\n".join(lines))
    assert not cycles, "import cycles:\n" + "\n".join(lines)


def test_imports_only_go_down_the_layers() -> None:
    against = []
    for imp in imports():
        src, dst = layer(imp.source), layer(imp.target)
        if imp.source == ANYWHERE and imp.target != ANYWHERE:
            against.append(imp)  # errors is imported by everything: it imports nothing
        elif src is not None and dst is not None and dst < src:
            against.append(imp)
    lines = [str(i) for i in against]
    print("\n".join(lines))
    assert not against, (
        "imports against the layer order " + " -> ".join(LAYERS) + ":\n" + ("\n".join(lines))
    )


def test_the_checker_sees_function_level_and_package_imports() -> None:
    """The checker itself: a lazy `from forge import x` and `from forge.a import b`
    inside a function are both read (so a cycle cannot hide in one)."""
    found = {(i.source, i.target) for i in imports()}
    # forge/cli/ imports all of its commands inside functions.
    assert ("forge.cli.views", "forge.commands.status") in found
    assert ("forge.__main__", "forge.cli") in found
