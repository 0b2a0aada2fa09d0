"""Plans for tests, built instead of written out: `task("a", run="echo a > a.txt",
files=["a.txt"])` is one `[[task]]` table, `plan(...)` the top keys and the tasks."""

from __future__ import annotations

import json
from collections.abc import Sequence

Value = str | int | float | bool | Sequence[str]


def _toml(value: Value) -> str:
    # JSON's strings, numbers, booleans and arrays of strings are TOML's too.
    return json.dumps(value if isinstance(value, str | int | float | bool) else list(value))


def task(tid: str, **keys: Value | None) -> str:
    """One `[[task]]` table; keys left as None are left out."""
    lines = ["[[task]]", f"id = {_toml(tid)}"]
    lines += [f"{k} = {_toml(v)}" for k, v in keys.items() if v is not None]
    return "\n".join(lines) + "\n"


def shell(tid: str, *, deps: Sequence[str] = (), **keys: Value | None) -> str:
    """A shell task writing `<tid>.txt`, the only file it may change."""
    return task(tid, run=f"echo {tid} > {tid}.txt", files=[f"{tid}.txt"], deps=deps or None, **keys)


def plan(*tasks: str, **keys: Value) -> str:
    """A plan's body (for helpers.runkit.write_plan): its top keys, then its tasks."""
    top = "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items())
    return top + "\n" + "\n".join(tasks)
