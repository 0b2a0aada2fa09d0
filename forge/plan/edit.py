"""Editing a plan file by its text, so what the person wrote stays: comments, order,
spacing. (A TOML writer would rewrite the whole file and lose every comment.)

A plan file is cut at its table headers into the top part, the plan's other tables
and one piece per `[[task]]` (with the comment lines right above its header, and any
`[task.x]` sub-table after it). Moving tasks moves whole pieces. Every edit is
checked by parsing the result: the tasks and settings must come out exactly as
intended, or the edit is refused and nothing is written.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Mapping, Sequence

from forge.base.files import JsonObject
from forge.errors import ForgeError
from forge.frozen import frozen

_HEADER = re.compile(r"""^\s*\[\[?\s*([A-Za-z0-9_.\-"' ]+?)\s*\]\]?\s*(#.*)?$""")
_COMMENT = re.compile(r"^\s*#")
_TOP_KEY = re.compile(r"^\s*(name|base)\s*=")
_DEPS = re.compile(r"^(?P<lead>[ \t]*deps[ \t]*=[ \t]*)\[[^\]]*\]", re.MULTILINE)


@frozen
class Piece:
    text: str
    task: str | None  # the id of the [[task]] it is; None for the top part and other tables
    table: str = ""  # its header's key ("" for the top part, before any header)


def pieces(text: str) -> list[Piece]:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m is None or i == 0:
            continue
        start = i
        while start > starts[-1] and _COMMENT.match(lines[start - 1]):
            start -= 1  # the comment right above a header belongs to its table
        starts.append(start)
    starts.append(len(lines))
    out: list[Piece] = []
    for a, b in itertools.pairwise(starts):
        chunk = "".join(lines[a:b])
        if not chunk:
            continue
        header = next((_HEADER.match(ln) for ln in lines[a:b] if _HEADER.match(ln)), None)
        key = header.group(1).replace(" ", "") if header else ""
        if key.startswith("task.") and out and out[-1].task is not None:
            out[-1] = Piece(out[-1].text + chunk, out[-1].task, "task")  # a task's sub-table
        elif key == "task":
            out.append(Piece(chunk, _task_id(chunk), key))
        else:
            out.append(Piece(chunk, None, key))
    return out


def _task_id(chunk: str) -> str | None:
    try:
        tasks = tomllib.loads(chunk).get("task")
    except tomllib.TOMLDecodeError:
        return None
    if isinstance(tasks, list) and len(tasks) == 1 and isinstance(tasks[0].get("id"), str):
        return str(tasks[0]["id"])
    return None


def _set_deps(chunk: str, deps: Sequence[str]) -> str:
    value = "[" + ", ".join(f'"{d}"' for d in deps) + "]"
    return _DEPS.sub(lambda m: m.group("lead") + value, chunk, count=1)


def split_text(
    text: str,
    moved: Sequence[str],
    *,
    new_name: str,
    new_base: str,
    base_note: str,
    new_deps: Mapping[str, Sequence[str]],
) -> tuple[str, str]:
    """(the old file without the moved tasks, the new plan's file): the new file has
    the old one's settings, `name` and `base` of its own, and the moved tasks, whose
    deps are set to `new_deps`."""
    parts = pieces(text)
    keep = [p.text for p in parts if p.task not in moved]
    settings = "".join(
        p.text
        if p.table
        else "".join(ln for ln in p.text.splitlines(keepends=True) if not _TOP_KEY.match(ln))
        for p in parts
        if p.task is None
    )
    if settings and not settings.endswith("\n"):
        settings += "\n"
    moving = []
    for p in parts:
        if p.task is not None and p.task in moved:
            chunk = p.text
            if list(new_deps.get(p.task, ())) != list(_deps_of(chunk)):
                chunk = _set_deps(chunk, new_deps.get(p.task, ()))
            moving.append(chunk if chunk.endswith("\n") else chunk + "\n")
    head = f'name = "{new_name}"\nbase = "{new_base}"  # {base_note}\n'
    old_text, new_text = "".join(keep), head + settings + "".join(moving)
    _check(text, (old_text, new_text), moved, new_name, new_base, new_deps)
    return old_text, new_text


def _deps_of(chunk: str) -> list[str]:
    tasks = tomllib.loads(chunk).get("task", [{}])
    return list(tasks[0].get("deps", []))


def _check(
    text: str,
    cut: tuple[str, str],
    moved: Sequence[str],
    new_name: str,
    new_base: str,
    new_deps: Mapping[str, Sequence[str]],
) -> None:
    """The edit must leave exactly what was meant; a file too unusual to cut by its
    text (a header inside a multi-line string, say) is refused, not mangled. `cut`:
    the old file's text and the new one's, as split_text made them."""
    old_text, new_text = cut
    try:
        before, old, new = (tomllib.loads(t) for t in (text, old_text, new_text))
    except tomllib.TOMLDecodeError as exc:
        raise _refuse(f"the result would not parse ({exc})") from exc
    tasks: list[JsonObject] = before.get("task", [])
    settings = {k: v for k, v in before.items() if k != "task"}
    want_old = {**settings, "task": [t for t in tasks if t.get("id") not in moved]}
    moving = [
        {**t, "deps": list(new_deps.get(t["id"], ()))}
        if "deps" in t or new_deps.get(t["id"])
        else t
        for t in tasks
        if t.get("id") in moved
    ]
    kept = {k: v for k, v in settings.items() if k not in ("name", "base")}
    want_new = {**kept, "name": new_name, "base": new_base, "task": moving}
    if not want_old["task"]:
        del want_old["task"]  # (every task moved: the split command refuses that itself)
    if old != want_old or new != want_new:
        raise _refuse("cutting it by its text would change more than the moved tasks")


def _refuse(why: str) -> ForgeError:
    return ForgeError(
        f"cannot move the tasks out of the plan file safely: {why}; move them by hand"
    )
