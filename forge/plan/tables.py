"""What forge shows people and scripts: plain text (fit for a log or a pipe) and
JSON with the same content."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from forge.git.repo import short_sha
from forge.plan.model import Plan, Task
from forge.plan.repo_config import DEFAULT_VERIFY_TIMEOUT, VerifyConfig

if TYPE_CHECKING:
    from forge.plan.dag import Waves
    from forge.plan.registry import Recorded

_FILES_WIDTH = 60  # keep a row on one line; the full list is in --json


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _kind(plan: Plan, task: Task) -> str:
    """shell, agent, or the candidates of a best-of-N task."""
    from forge.plan.candidates import candidates_of, select_of

    if task.is_shell:
        return "shell"
    found = candidates_of(plan, task)
    if not found:
        return "agent"
    return f"best of {len(found)} ({select_of(plan, task)}): " + ", ".join(c.label for c in found)


def wave_table(plan: Plan, waves: Waves) -> str:
    """The plan's waves as a table: wave (1-based), task, kind, deps, files, note."""
    tasks = {t.id: t for t in plan.tasks}
    rows: list[list[str]] = []
    for n, wave in enumerate(waves.waves, start=1):
        for tid in wave:
            t = tasks[tid]
            rows.append(
                [
                    str(n),
                    tid,
                    _kind(plan, t),
                    ", ".join(t.deps) or "-",
                    _short(" ".join(t.files), _FILES_WIDTH),
                    waves.deferrals.get(tid, ""),
                ]
            )
    return "\n".join(_fitted(["wave", "task", "kind", "deps", "files", "note"], rows))


TABLE_WIDTH = 100  # the wave table fits a terminal of this many columns


def _fitted(
    headers: list[str], rows: list[list[str]], *, wrap: tuple[int, ...] = (3, 4, 5)
) -> list[str]:
    """`text_table`, with the `wrap` columns (deps, files, note) wrapped onto more
    lines, widest first, until a row fits TABLE_WIDTH columns."""
    import textwrap

    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    floor = {i: max(len(headers[i]), 12) for i in wrap}
    while sum(widths) + 2 * (len(widths) - 1) > TABLE_WIDTH:
        i = max(wrap, key=lambda c: widths[c] - floor[c])
        if widths[i] <= floor[i]:
            break  # the fixed columns alone are wider: leave it
        widths[i] -= 1

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    for row in rows:
        cells = [
            textwrap.wrap(c, widths[i], break_on_hyphens=False) or [""] if i in wrap else [c]
            for i, c in enumerate(row)
        ]
        for n in range(max(len(c) for c in cells)):
            out.append(line([c[n] if n < len(c) else "" for c in cells]))
    return out


def plan_summary(plan: Plan, waves: Waves, *, recorded: Recorded | None) -> str:
    """One line under the table: what was recorded where, or that nothing was."""
    count = f"{len(plan.tasks)} task{'s' * (len(plan.tasks) != 1)}"
    wcount = f"{len(waves.waves)} wave{'s' * (len(waves.waves) != 1)}"
    if recorded is None:
        return f"plan '{plan.name}' is valid ({count}, {wcount}); nothing recorded (--check)"
    return (
        f"recorded plan '{plan.name}' ({count}, {wcount}, base {recorded.base_ref} "
        f"@ {short_sha(recorded.base_commit)}); run it with `forge run {plan.name}`"
    )


def wave_data(
    plan: Plan,
    waves: Waves,
    *,
    critical_path: Mapping[str, float],
    recorded: Recorded | None,
    record_file: Path | None,
) -> dict[str, object]:
    """The same content as the wave table, for scripts (`forge plan --json`)."""
    from forge.plan.candidates import candidates_of

    return {
        "plan": plan.name,
        "source": None if plan.source is None else str(plan.source),
        "recorded": recorded is not None,
        "record_file": None if record_file is None else str(record_file),
        "base_ref": None if recorded is None else recorded.base_ref,
        "base_commit": None if recorded is None else recorded.base_commit,
        "max_parallel": plan.max_parallel,
        "waves": [list(w) for w in waves.waves],
        "tasks": [
            {
                "id": t.id,
                "title": t.title,
                "kind": "shell" if t.is_shell else "agent",
                "wave": waves.wave_of[t.id] + 1,
                "deps": list(t.deps),
                "files": list(t.files),
                "deferral": waves.deferrals.get(t.id),
                "critical_path": critical_path.get(t.id),
                "candidates": [c.label for c in candidates_of(plan, t)],
            }
            for t in plan.tasks
        ],
    }


def _limit(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def verify_summary(config: VerifyConfig | None, *, known: bool = True) -> str:
    """What verifies the plan's work, and each lane run's time limit. `known`: False
    when forge.toml was not read (`forge plan --check`) and the plan sets none."""
    if config is None:
        if not known:
            return (
                "verification: forge.toml's [verify], if it has one (each lane run limited "
                f"to its `timeout`, default {_limit(DEFAULT_VERIFY_TIMEOUT)})"
            )
        return "verification: none configured (work lands UNVERIFIED)"
    names = [name for name, _cmd in config.lanes]
    lanes = f"{len(names)} lane{'s' * (len(names) != 1)} ({', '.join(names)})"
    return f"verification: {lanes}, each run limited to {_limit(config.timeout)} ([verify] timeout)"
