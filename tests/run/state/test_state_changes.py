"""A task's status changes only through TaskState's methods (run/state/run_state.py):
a status and what goes with it (reasons, the last attempt, the merge) never drift."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "forge"
OWNER = PACKAGE / "run" / "state" / "run_state.py"


def _status_writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _flat(target)]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr == "status":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for e in target.elts for t in _flat(e)]
    return [target]


def test_only_the_task_state_changes_a_status() -> None:
    writes = [w for p in sorted(PACKAGE.rglob("*.py")) if p != OWNER for w in _status_writes(p)]
    assert writes == [], "set a status through TaskState's methods: " + ", ".join(writes)
