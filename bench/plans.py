"""Plan files for the benchmarks, written as TOML text (no extra dependency)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class BenchTask:
    id: str
    run: str
    files: tuple[str, ...]
    deps: tuple[str, ...] = ()
    estimate: float | None = None


@dataclass(frozen=True)
class BenchPlan:
    name: str
    tasks: Sequence[BenchTask]
    max_parallel: int = 2
    verify: str | None = None
    extra: dict[str, str] = field(default_factory=dict)  # raw TOML values, e.g. verify_reruns

    def write(self, folder: Path) -> Path:
        q = json.dumps  # a JSON string is a valid TOML basic string
        lines = [f"name = {q(self.name)}", f"max_parallel = {self.max_parallel}"]
        if self.verify is not None:
            lines.append(f"verify = {q(self.verify)}")
        lines += [f"{k} = {v}" for k, v in self.extra.items()]
        for t in self.tasks:
            lines += ["", "[[task]]", f"id = {q(t.id)}", f"run = {q(t.run)}"]
            lines.append(f"files = [{', '.join(q(f) for f in t.files)}]")
            if t.deps:
                lines.append(f"deps = [{', '.join(q(d) for d in t.deps)}]")
            if t.estimate is not None:
                lines.append(f"estimate = {t.estimate:g}")
        path = folder / f"{self.name}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path


def edit_tasks(n: int, paths: Sequence[str], *, prefix: str = "t") -> list[BenchTask]:
    """n shell tasks, each appending a line to its own file."""
    return [
        BenchTask(id=f"{prefix}{i:03d}", run=f"echo 'change {i}' >> {p}", files=(p,))
        for i, p in zip(range(n), paths, strict=True)
    ]
