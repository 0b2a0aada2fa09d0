"""Print the figures of forge's code the architecture is held to: `Any` and
`dict[str, Any]` (in the package, and in run/ and cluster/; the uses of the JSON
edge's alias `JsonObject` apart), functions with more
than 6 parameters (a command's options in forge/cli/ aside), the largest classes and modules, and blocks of 6 lines repeated
in the tests.

    python tools/measure_code.py [--json]
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "forge"
TESTS = ROOT / "tests"
MAX_PARAMS = 6
BLOCK = 6


def _modules(where: Path) -> list[Path]:
    return sorted(p for p in where.rglob("*.py") if "__pycache__" not in p.parts)


def _count(pattern: str, paths: list[Path]) -> int:
    rx = re.compile(pattern)
    return sum(len(rx.findall(p.read_text(encoding="utf-8"))) for p in paths)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return len([n for n in names if n.arg not in ("self", "cls")]) + bool(a.vararg) + bool(a.kwarg)


def wide_functions() -> list[tuple[str, int]]:
    out = []
    # A command's options are its parameters: forge/cli/ is left out.
    for path in (p for p in _modules(PACKAGE) if "cli" not in p.relative_to(PACKAGE).parts[:1]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = _params(node)
                if n > MAX_PARAMS:
                    out.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", n))
    return sorted(out, key=lambda x: -x[1])


def classes() -> list[tuple[str, int]]:
    out = []
    for path in _modules(PACKAGE):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                out.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", size))
    return sorted(out, key=lambda x: -x[1])


def modules() -> list[tuple[str, int]]:
    sizes = [(str(p.relative_to(ROOT)), len(p.read_text().splitlines())) for p in _modules(PACKAGE)]
    return sorted(sizes, key=lambda x: -x[1])


def _normal(line: str) -> str:
    line = line.strip()
    if not line or line.startswith(("#", "import ", "from ")) or line in ("(", ")", "]", "}"):
        return ""
    return " ".join(line.split())


def repeated_test_blocks() -> int:
    """Runs of BLOCK significant lines that stand in two or more places of the tests."""
    seen: Counter[tuple[str, ...]] = Counter()
    for path in _modules(TESTS):
        lines = [n for n in map(_normal, path.read_text(encoding="utf-8").splitlines()) if n]
        windows = {tuple(lines[i : i + BLOCK]) for i in range(len(lines) - BLOCK + 1)}
        seen.update(windows)
    repeated = [w for w, n in seen.items() if n > 1]
    # Overlapping windows of one long repeated run count once: keep a window only when
    # the window one line earlier is not also repeated.
    starts = {w[1:] for w in repeated}
    return sum(1 for w in repeated if w[:-1] not in starts)


def figures() -> dict[str, object]:
    pkg = _modules(PACKAGE)
    inner = [p for p in pkg if p.parts[len(PACKAGE.parts)] in ("run", "cluster")]
    return {
        "Any": _count(r"\bAny\b", pkg),
        "dict[str, Any]": _count(r"dict\[str, Any\]", pkg),
        "dict[str, Any] in run/ and cluster/": _count(r"dict\[str, Any\]", inner),
        # The one alias of `dict[str, Any]`, for JSON as read or written at an edge:
        # counted apart, so a figure above cannot fall by hiding `Any` behind it.
        "JsonObject (the JSON edge's alias)": _count(r"\bJsonObject\b", pkg),
        f"functions with more than {MAX_PARAMS} parameters": len(wide_functions()),
        "widest functions": wide_functions()[:8],
        "largest classes": classes()[:5],
        "largest modules": modules()[:5],
        f"repeated {BLOCK}-line blocks in tests": repeated_test_blocks(),
        "test modules by folder (most)": Counter(
            str(p.parent.relative_to(ROOT)) for p in _modules(TESTS) if p.name.startswith("test_")
        ).most_common(3),
    }


def main(argv: list[str]) -> int:
    data = figures()
    if "--json" in argv:
        print(json.dumps(data, indent=2))
        return 0
    for key, value in data.items():
        if isinstance(value, list):
            print(f"{key}:")
            for name, n in value:
                print(f"  {n:5}  {name}")
        else:
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
