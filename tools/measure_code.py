"""Print the figures of forge's code the architecture is held to: `Any` and
`dict[str, Any]` (in the package, and in run/ and cluster/; the uses of the JSON
edge's alias `JsonObject` apart), functions with more than 6 parameters (a
command's options in forge/cli/ aside), the largest classes and modules, blocks of
6 lines repeated in the tests; and of the run journal: the state changed besides
its store (direct reducer calls), consequences of an event written by hand at its
writers (`phases.end`, `history.settle`), the event kinds the codec's round-trip
test covers; classes with 8 fields or more, class names defined more than once,
and test lines per line of the package.

    python tools/measure_code.py [--json] [--root CHECKOUT]

`--root`: measure another checkout of forge (an earlier commit's, say).
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


def _trees(paths: list[Path]) -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in paths]


def reducer_calls() -> list[str]:
    """Calls of the reducer (`reducer.apply`, `reducer.apply_attempt`, or its
    functions imported by name) outside the store and the reducer itself."""
    out = []
    own = {"forge/run/state/store.py", "forge/run/state/reducer.py"}
    for path, tree in _trees(_modules(PACKAGE)):
        if str(path.relative_to(ROOT)) in own:
            continue
        named = {
            a.asname or a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("state.reducer")
            for a in node.names
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            direct = isinstance(f, ast.Attribute) and ast.unparse(f.value) == "reducer"
            if direct or (isinstance(f, ast.Name) and f.id in named):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


def hand_consequences() -> int:
    """Call sites that write an event's consequence by hand: an attempt's phases
    closed (`phases.end`), its history settled (`history.settle`)."""
    return _count(r"\b(?:phases\.end|history\.settle)\(", _modules(PACKAGE))


def _event_kinds() -> list[str]:
    tree = ast.parse((PACKAGE / "run" / "state" / "events.py").read_text(encoding="utf-8"))
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    bases = {ast.unparse(b) for node in classes for b in node.bases}
    # (the kinds: every class of the module but those others derive from, Event's own)
    return [node.name for node in classes if node.name not in bases]


def round_trip_kinds() -> tuple[int, int]:
    """The event kinds the codec's round-trip test covers, and all kinds: all when the
    test is generated from the registry (`KINDS`), else those its samples name."""
    kinds = _event_kinds()
    covered: set[str] = set()
    for path, tree in _trees(_modules(TESTS / "run" / "state")):
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or "reads_back" not in node.name:
                continue
            source = ast.unparse(node)
            if "KINDS" in source:
                return len(kinds), len(kinds)
            samples = [
                n
                for n in tree.body
                if isinstance(n, ast.AnnAssign | ast.Assign) and "SAMPLES" in ast.unparse(n)
            ]
            text = " ".join(ast.unparse(n) for n in samples) + source
            covered |= {k for k in kinds if re.search(rf"\b{k}\(", text)}
        del path
    return len(covered), len(kinds)


def _fields(node: ast.ClassDef) -> int:
    return sum(
        1
        for n in node.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and "ClassVar" not in ast.unparse(n.annotation)
    )


def wide_classes() -> list[tuple[str, int]]:
    """Classes of the package with 8 fields or more."""
    out = []
    for path, tree in _trees(_modules(PACKAGE)):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _fields(node) >= 8:
                out.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", _fields(node)))
    return sorted(out, key=lambda x: -x[1])


def repeated_class_names() -> list[tuple[str, int]]:
    """Class names the package defines more than once."""
    names: Counter[str] = Counter(
        node.name
        for _path, tree in _trees(_modules(PACKAGE))
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    )
    return sorted(((n, c) for n, c in names.items() if c > 1), key=lambda x: (-x[1], x[0]))


def test_lines_per_code_line() -> float:
    def lines(paths: list[Path]) -> int:
        return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)

    return round(lines(_modules(TESTS)) / lines(_modules(PACKAGE)), 2)


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
        "ways to change the state besides the store (direct reducer calls)": len(reducer_calls()),
        "hand-written consequences (phases.end + history.settle calls)": hand_consequences(),
        "event kinds in the round-trip test (covered/all)": "{}/{}".format(*round_trip_kinds()),
        "classes with 8 fields or more": len(wide_classes()),
        "widest classes (fields)": wide_classes()[:5],
        "class names defined more than once": repeated_class_names(),
        "test lines per code line": test_lines_per_code_line(),
        "test modules by folder (most)": Counter(
            str(p.parent.relative_to(ROOT)) for p in _modules(TESTS) if p.name.startswith("test_")
        ).most_common(3),
    }


def main(argv: list[str]) -> int:
    global ROOT, PACKAGE, TESTS
    if "--root" in argv:
        ROOT = Path(argv[argv.index("--root") + 1]).resolve()
        PACKAGE, TESTS = ROOT / "forge", ROOT / "tests"
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
