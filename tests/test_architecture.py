"""The dependency rule, over the real import graph of the package.

Every `import` and `from ... import` in every module under forge/ counts: module
level, inside functions, and under `if TYPE_CHECKING:` (a cycle there is a cycle in
the design). Imports go only down the layers; `forge.errors` and `forge.frozen` are
importable from anywhere; within one layer any import is fine as long as the graph
has no cycle.
Inside run/ its parts are layers too (RUN_LAYERS), only the state's store reaches
the reducer (the one write path of a run's state), and no function of the package
takes more than 6 parameters (a command's options in forge/cli/ aside).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "forge"
# Top to bottom: a module may import from its own layer and the layers below it.
LAYERS = (
    "cli",
    "serve",
    "commands",
    "hooks",
    "cluster",
    "host",
    "run",
    "verify",
    "plan",
    "agents",
    "layers",
    "git",
    "base",
)
TOP = {"forge", "forge.cli", "forge.__main__"}  # the entry points sit with cli
# Importable from anywhere, importing nothing of forge: the errors and `@frozen`.
ANYWHERE = frozenset({"forge.errors", "forge.frozen"})
# run/'s own layers, top to bottom: the run's own modules (runner, dispatch,
# candidates, ...), the gate, one attempt, the records (history, routing, spend,
# forecast), the run context every part is handed, the state.
RUN_LAYERS = ("run", "gate", "attempt", "records", "context", "state")
# Folders of run/ that hold the run's own modules (its top layer), split by concern.
RUN_OWN = frozenset({"dispatch"})
MAX_PARAMS = 6


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


def imports_in(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of one module (`path`) of forge's, each to the module it reaches."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path
    found: list[Import] = []
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
    return found


def imports() -> list[Import]:
    modules = module_names()
    found = [i for module, path in modules.items() for i in imports_in(module, path, modules)]
    return list(dict.fromkeys(found))


def layer(module: str) -> int | None:
    """The index in LAYERS (0 is the top); None for forge.errors and forge.frozen."""
    if module in ANYWHERE:
        return None
    if module in TOP:
        return 0
    return LAYERS.index(module.split(".")[1])


def run_layer(module: str) -> int | None:
    """The index in RUN_LAYERS (0 is the top) of a module of run/; None outside it."""
    parts = module.split(".")
    if parts[:2] != ["forge", "run"]:
        return None
    inner = parts[2] if len(parts) > 2 else "run"
    return RUN_LAYERS.index(inner) if inner in RUN_LAYERS else 0


def upward(found: list[Import]) -> list[Import]:
    """The imports against an order: the package's layers, and run/'s inside it."""
    against = []
    for imp in found:
        src, dst = layer(imp.source), layer(imp.target)
        if imp.source in ANYWHERE:
            against.append(imp)  # imported by everything: they import nothing of forge
        elif src is not None and dst is not None and dst < src:
            against.append(imp)
        else:
            inner_src, inner_dst = run_layer(imp.source), run_layer(imp.target)
            if inner_src is not None and inner_dst is not None and inner_dst < inner_src:
                against.append(imp)
    return against


def test_every_module_belongs_to_a_layer() -> None:
    strays = [
        m
        for m in module_names()
        if m not in TOP and m not in ANYWHERE and m.split(".")[1] not in LAYERS
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
    against = upward(imports())
    lines = [str(i) for i in against]
    print("\n".join(lines))
    assert not against, (
        "imports against the layer order "
        + " -> ".join(LAYERS)
        + " (inside run/: "
        + " -> ".join(RUN_LAYERS)
        + "):\n"
        + "\n".join(lines)
    )


def test_run_has_its_own_layers() -> None:
    """Every folder of run/ is one of RUN_LAYERS (a new one is given its place in the
    order) or one of the run's own (RUN_OWN), and so is the run context."""
    run = PACKAGE / "run"
    parts = {p.name for p in run.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert parts >= RUN_OWN
    assert (parts - RUN_OWN) | {"run", "context"} == set(RUN_LAYERS)
    assert (run / "context.py").is_file()


def test_an_upward_import_is_named(tmp_path: Path) -> None:
    """The checker itself: an import planted in the records that reaches up to the
    attempt, and one in run/'s state that reaches up to the run, are both named."""
    modules = module_names()
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from forge.run.attempt.context import Outcome\n"
        "def f() -> None:\n"
        "    from forge.run import runner\n"
        "from forge.run.state import run_state\n"
    )
    found = imports_in("forge.run.records.planted", planted, modules)
    assert sorted((i.target, i.where) for i in upward(found)) == [
        ("forge.run.attempt.context", f"{planted}:1"),
        ("forge.run.runner", f"{planted}:3"),
    ]
    deep = imports_in("forge.run.state.planted", planted, modules)
    assert {i.target for i in upward(deep)} == {"forge.run.attempt.context", "forge.run.runner"}
    # Between the package's layers as before: the plan may not reach up to run/.
    plan = imports_in("forge.plan.planted", planted, modules)
    assert sorted(i.target for i in upward(plan)) == [
        "forge.run.attempt.context",
        "forge.run.runner",
        "forge.run.state.run_state",
    ]


# A run's state changes one way: through its store (`StateStore.record`, and
# `record_attempt` for an attempt kept outside a plan's state), the one module that
# applies events with the reducer.
REDUCER = "forge.run.state.reducer"
STORE = "forge.run.state.store"


def reducer_users(found: list[Import]) -> list[Import]:
    """The modules besides the store that reach the reducer (to apply an event)."""
    return [i for i in found if i.target == REDUCER and i.source != STORE]


def test_only_the_store_applies_events() -> None:
    users = reducer_users(imports())
    assert not users, "record events through the store (StateStore.record), not:\n" + "\n".join(
        map(str, users)
    )


def test_a_direct_reducer_call_is_named(tmp_path: Path) -> None:
    """The checker itself: the reducer reached by a module, a name or in a function."""
    modules = module_names()
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from forge.run.state import reducer\n"
        "from forge.run.state.reducer import apply\n"
        "def f() -> None:\n"
        "    import forge.run.state.reducer\n"
    )
    found = imports_in("forge.run.state.recovery", planted, modules)
    assert [i.where for i in reducer_users(found)] == [f"{planted}:{n}" for n in (1, 2, 4)]
    assert reducer_users(imports_in(STORE, planted, modules)) == []


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return len([n for n in names if n.arg not in ("self", "cls")]) + bool(a.vararg) + bool(a.kwarg)


def wide_functions(path: Path) -> list[str]:
    """The functions of a module taking more than MAX_PARAMS parameters."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.name}:{node.lineno} {node.name} ({_parameters(node)})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _parameters(node) > MAX_PARAMS
    ]


def test_no_function_takes_more_than_6_parameters() -> None:
    """Several values that travel together are a small frozen record. A command's
    options in forge/cli/ are its parameters (typer reads them there)."""
    wide = [
        f"{path.parent.relative_to(PACKAGE.parent)}/{w}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "cli"
        for w in wide_functions(path)
    ]
    assert not wide, f"more than {MAX_PARAMS} parameters:\n" + "\n".join(wide)


def test_a_wide_function_is_named(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "class A:\n"
        "    def ok(self, a, b, c, d, e, f): ...\n"
        "def wide(a, b, c, d, e, f, *, g): ...\n"
        "def rest(a, b, c, d, e, *args, **kwargs): ...\n"
    )
    assert wide_functions(planted) == ["planted.py:3 wide (7)", "planted.py:4 rest (7)"]


def test_the_checker_sees_function_level_and_package_imports() -> None:
    """The checker itself: a lazy `from forge import x` and `from forge.a import b`
    inside a function are both read (so a cycle cannot hide in one)."""
    found = {(i.source, i.target) for i in imports()}
    # forge/cli/ imports all of its commands inside functions.
    assert ("forge.cli.views", "forge.commands.status") in found
    assert ("forge.__main__", "forge.cli") in found
