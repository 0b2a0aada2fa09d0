"""Nothing but the reducer sets a field of the run state.

Every field of RunState, TaskState, Attempt and Slot (read from the dataclasses) is
written only by forge/run/state/reducer.py: an assignment, an augmented assignment,
a `del`, or a mutating call (append, extend, ...) of such a field anywhere else in
the package fails here. Constructing a record (keyword arguments) and reading one
from its dict (`from_dict`) are not writes. The names are common words, so a write
to an attribute of `self` in a class that is not a state record, and the receivers
listed in NOT_STATE (objects of other types that share a field's name), are not
state."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

from forge.run.state.run_state import Attempt, RunState, Slot, TaskState

PACKAGE = Path(__file__).resolve().parents[3] / "forge"
REDUCER = "run/state/reducer.py"
STATE_CLASSES = frozenset({"RunState", "TaskState", "Attempt", "Slot"})
FIELDS = frozenset(f.name for cls in (RunState, TaskState, Attempt, Slot) for f in fields(cls))
MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "clear", "update", "setdefault", "remove"}
)

# (module, receiver.attribute): objects of other types whose attribute has a field's name.
NOT_STATE = frozenset(
    {
        ("run/runner.py", "report.paused"),  # RunReport
        ("run/runner.py", "report.verification"),  # RunReport
        ("run/gate/by_tests.py", "found.pre_existing"),  # by_tests.Found
        ("run/gate/selection.py", "out.cost_usd"),  # Selection
        ("run/gate/selection.py", "out.input_tokens"),  # Selection
        ("run/gate/selection.py", "out.output_tokens"),  # Selection
        ("commands/plans/combine.py", "combo.commit"),  # Combination
        ("commands/plans/combine.py", "combo.verification"),  # Combination
        ("commands/draft.py", "result.checked.warnings"),  # the draft's checked plan
        ("commands/draft.py", "result.cost_usd"),  # Drafted
        ("commands/draft.py", "checked.plan"),  # CheckedPlan
        ("run/dispatch/loop.py", "self.ctx.plan"),  # RunContext
        ("run/gate/bisection.py", "out.pre_existing"),  # the gate's Outcome
    }
)


def _name(node: ast.expr) -> str:
    return ast.unparse(node)


def _field_node(node: ast.expr) -> ast.Attribute | None:
    """The `x.field` a target writes (itself, or the container it indexes)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr in FIELDS:
        return node
    return None


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found: list[ast.expr] = []
        for target in node.targets:
            found += list(target.elts) if isinstance(target, ast.Tuple) else [target]
        return found
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in MUTATORS
    ):
        return [node.func.value]
    return []


class _Writes(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.classes: list[str] = []
        self.functions: list[str] = []
        self.found: list[str] = []
        self.excused: set[tuple[str, str]] = set()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def generic_visit(self, node: ast.AST) -> None:
        for target in _targets(node):
            attribute = _field_node(target)
            if attribute is not None and not self._excepted(attribute):
                self.found.append(f"{self.module}:{node.lineno}: {_name(attribute)}")  # type: ignore[attr-defined]
        super().generic_visit(node)

    def _excepted(self, attribute: ast.Attribute) -> bool:
        receiver = _name(attribute.value)
        in_state_class = bool(self.classes) and self.classes[-1] in STATE_CLASSES
        if receiver == "self" and self.classes and not in_state_class:
            return True  # an attribute of another class's own
        if "from_dict" in self.functions:
            return True  # reading a record from its dict
        key = (self.module, _name(attribute))
        if key in NOT_STATE:
            self.excused.add(key)
            return True
        return False


def field_writes(
    source: str, module: str, excused: set[tuple[str, str]] | None = None
) -> list[str]:
    """Where `source` (the module `module`) writes a field of the run state; the
    NOT_STATE entries it met are added to `excused`."""
    if module == REDUCER:
        return []
    visitor = _Writes(module)
    visitor.visit(ast.parse(source))
    if excused is not None:
        excused |= visitor.excused
    return visitor.found


def test_only_the_reducer_writes_a_field_of_the_state() -> None:
    found: list[str] = []
    excused: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        found += field_writes(path.read_text(), module, excused)
    assert not found, "state fields written outside the reducer:\n" + "\n".join(found)
    assert excused == NOT_STATE, f"NOT_STATE names writes that are gone: {NOT_STATE - excused}"


def test_a_planted_write_is_found() -> None:
    planted = {
        "ts.status = Status.MERGED": "ts.status",
        "ts.reason += 'x'": "ts.reason",
        "state.tasks[tid] = TaskState(id=tid)": "state.tasks",
        "del state.slots[name]": "state.slots",
        "last.phases.append({})": "last.phases",
        "ts.salvage.extend(refs)": "ts.salvage",
        "a.cost_usd, a.log = 1.0, 'x'": "a.cost_usd",
        "ctx.state.gate_steps.clear()": "ctx.state.gate_steps",
        "class Attempt:\n    def f(self):\n        self.pgid = None": "self.pgid",
    }
    for source, written in planted.items():
        found = field_writes(
            f"def f():\n    {source}\n" if "class" not in source else source, "run/x.py"
        )
        assert any(line.endswith(written) for line in found), (source, found)
    assert field_writes("ts.status = Status.MERGED\n", REDUCER) == []
    assert field_writes("class Other:\n    def f(self):\n        self.status = 1\n", "x.py") == []
    assert field_writes("ts = TaskState(id='t', status=Status.MERGED)\n", "x.py") == []
