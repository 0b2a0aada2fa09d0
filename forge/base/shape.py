"""Does data read from a state file have the shape of the dataclass it will become?

Valid JSON of the wrong shape (`{}`, `[]`, `null`, a number where a string belongs)
would otherwise surface as a traceback far from the file that holds it. The check
follows the dataclass's own annotations, so it stays true as fields are added.

JSON read as it came (an agent's events, a small file) is an `object`: `as_object`,
`number` and `as_int` narrow its values where they are read.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Union


def problem(cls: type, data: object, where: str = "") -> str | None:
    """Why `data` cannot be read as `cls` (a dataclass), or None. Keys `cls` does not
    know are ignored (an older forge's fields); a missing key must have a default."""
    # Looked at once without words (a 1000-task state holds ~100k values), and again,
    # saying where, only when something is wrong.
    return None if _checker(cls)(data) else _problem(cls, data, where)


@functools.cache
def _checker(hint: object) -> Callable[[object], bool]:
    """A function telling whether a value has the shape of `hint` (what
    `_value_problem` finds no fault with), made once per hint."""
    if hint is Any:
        return lambda _value: True
    written_as = getattr(hint, "__json_shape__", None)
    if written_as is not None:  # a record written as a value of another type
        return _checker(written_as)
    origin, args, is_record = _hint(hint)
    if origin in (Union, types.UnionType):
        options = tuple(_checker(o) for o in args if o is not type(None))
        if len(options) == 1 and len(args) == 2:  # an optional value: most fields
            (inner,) = options
            return lambda value: value is None or inner(value)
        options = tuple(_checker(o) for o in args)
        return lambda value: any(ok(value) for ok in options)
    if is_record and isinstance(hint, type):
        return _record_checker(hint)
    if origin is list:
        item = _checker(args[0])
        return lambda value: isinstance(value, list) and all(map(item, value))
    if origin is dict:
        item = _checker(args[1])
        return lambda value: isinstance(value, dict) and all(map(item, value.values()))
    if hint is type(None):
        return lambda value: value is None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = _values(hint)
        return lambda value: not isinstance(value, list | dict) and value in values
    if hint in (int, float):
        number = int if hint is int else int | float
        return lambda value: isinstance(value, number) and not isinstance(value, bool)
    if isinstance(hint, type):
        return lambda value: isinstance(value, hint)
    return lambda _value: True  # a hint this check does not model: the reader decides


def _record_checker(cls: type) -> Callable[[object], bool]:
    hints, fields = _shape_of(cls)
    required = tuple(
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    # Its fields' checkers are made at its first use: a record may hold itself.
    checks: list[tuple[str, Callable[[object], bool]]] = []

    def ok(value: object) -> bool:
        if not isinstance(value, dict):
            return False
        for name in required:
            if name not in value:
                return False
        if not checks:
            checks.extend((f.name, _checker(hints[f.name])) for f in fields)
        for name, check in checks:  # noqa: SIM110 (a loop, no generator: ~100k values)
            if name in value and not check(value[name]):
                return False
        return True

    return ok


def _problem(cls: type, data: object, where: str) -> str | None:
    label = where or "the top level"
    if not isinstance(data, dict):
        return f"{label} is {_kind(data)}, not an object"
    hints, fields = _shape_of(cls)
    for f in fields:
        at = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required:
                return f"`{at}` is missing"
            continue
        why = _value_problem(hints[f.name], data[f.name], at)
        if why:
            return why
    return None


@functools.cache
def _shape_of(cls: type) -> tuple[dict[str, object], tuple[dataclasses.Field[object], ...]]:
    # Once per class: resolving the annotations costs ~0.4 ms, and a 1000-task state
    # holds thousands of records (`forge status` must stay fast).
    return typing.get_type_hints(cls), dataclasses.fields(cls)


@functools.cache
def _hint(hint: object) -> tuple[object, tuple[object, ...], bool]:
    """(origin, args, is a dataclass) of a type hint, worked out once per hint."""
    is_record = dataclasses.is_dataclass(hint) and isinstance(hint, type)
    return typing.get_origin(hint), typing.get_args(hint), is_record


def _value_problem(hint: object, value: object, at: str) -> str | None:
    if hint is Any:
        return None
    written_as = getattr(hint, "__json_shape__", None)
    if written_as is not None:
        return _value_problem(written_as, value, at)
    origin, args, is_record = _hint(hint)
    if origin in (Union, types.UnionType):
        if any(_value_problem(o, value, at) is None for o in args):
            return None
        others = [o for o in args if o is not type(None)]
        if len(others) == 1:  # an optional value: what is wrong inside it
            return _value_problem(others[0], value, at)
        return f"`{at}` is {_kind(value)}"
    if is_record and isinstance(hint, type):
        return _problem(hint, value, at)
    if origin in (list, dict):
        return _container_problem(origin, hint, value, at)
    return _scalar_problem(hint, value, at)


def _container_problem(origin: object, hint: object, value: object, at: str) -> str | None:
    if origin is list:
        if not isinstance(value, list):
            return f"`{at}` is {_kind(value)}, not a list"
        (item,) = _hint(hint)[1]
        for n, v in enumerate(value):
            why = _value_problem(item, v, f"{at}[{n}]")
            if why:
                return why
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return f"`{at}` is {_kind(value)}, not an object"
        _, item = _hint(hint)[1]
        for k, v in value.items():
            why = _value_problem(item, v, f"{at}.{k}")
            if why:
                return why
    return None


def _scalar_problem(hint: object, value: object, at: str) -> str | None:
    if _checker(hint)(value):
        return None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"`{at}` is {_kind(value)}, not one of {[m.value for m in hint]}"
    return f"`{at}` is {_kind(value)}"


@functools.cache
def _values(hint: type[enum.Enum]) -> frozenset[object]:
    return frozenset(m.value for m in hint)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def as_object(value: object) -> Mapping[str, object] | None:
    """A JSON value as an object (its fields by name); None when it is another value."""
    return value if isinstance(value, dict) else None


def number(value: object) -> int | float | None:
    """A JSON value as a number; None for any other value (a boolean is no number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def as_int(value: object) -> int:
    """`int(value)` of a JSON value: a number or a string of one; any other value is
    the TypeError (and its words) `int` raises."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(
        "int() argument must be a string, a bytes-like object or a real number, "
        f"not '{type(value).__name__}'"
    )
