"""Which recorded plan a command means, decided from the names alone: cheap (no record
is read), so `forge status` and the other quick commands pay nothing for it, and
every command says the same thing when the answer is none or several."""

from __future__ import annotations

import re
from collections.abc import Sequence

from forge.errors import ForgeError


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """ " (did you mean 'x'?)" when `name` looks like one of `known`, else ""."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""


# One component of a git ref name: a plan, a task, a lane are named so.
NAME_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def ref_part_problem(value: str) -> str | None:
    """Why `value` cannot be one component of a git ref name (None if it can)."""
    if not NAME_PART.match(value):
        return "use letters, digits, `.`, `_` and `-`, starting with a letter or digit"
    if ".." in value:
        return "`..` is not allowed in a git ref name"
    if value.endswith((".lock", ".")):
        return "a git ref name cannot end in `.lock` or `.`"
    return None


def looks_like_path(ref: str) -> bool:
    return "/" in ref or ref.endswith(".toml") or ref.startswith(".")


def recorded_name(names: Sequence[str], ref: str | None) -> str | None:
    """The recorded plan `ref` names when that needs no file: None for the one plan
    recorded, or a recorded name. None when `ref` must be read as a plan file."""
    if ref is None:
        if not names:
            raise ForgeError("no plan recorded; run `forge plan PLAN.toml` first")
        if len(names) > 1:
            raise ForgeError(f"several plans are recorded ({', '.join(names)}); name one")
        return names[0]
    if not looks_like_path(ref) and ref in names:
        return ref
    return None
