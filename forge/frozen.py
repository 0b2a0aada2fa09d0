"""`@frozen`: a frozen dataclass to the type checker, a cheap one at import.

forge's values (events, plan parts, states, results) are frozen dataclasses: no
code assigns to one after it is made. `dataclass(frozen=True)` enforces that at run
time with generated `__setattr__`, `__delattr__` and `__hash__` methods, each
compiled from source when the class is defined: about 0.4 ms a class, 60-70 ms of
every forge process's start (about 150 such classes load for `forge run`), which
is a fifth of a short command's time and the largest single cost of the test
suite's thousands of `forge` processes.

`@frozen` makes the same dataclass without those three methods. The type checker
still treats it as frozen (`dataclass_transform(frozen_default=True)`, checked by
`mypy --strict` in CI), so an assignment to a field is refused where it is
written, not when it runs. Equality, ordering, `repr`, `replace` and `fields` are
the dataclass's own; the hash is the frozen dataclass's (the fields that compare),
given by one shared function instead of compiled code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast, dataclass_transform, overload

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T")


@overload
def frozen(cls: type[_T], /) -> type[_T]: ...
@overload
def frozen(*, kw_only: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(
    cls: type[_T] | None = None, /, *, kw_only: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """`@frozen` or `@frozen(kw_only=True)` above a class: see the module's text."""

    def make(cls: type[_T]) -> type[_T]:
        own_hash = cls.__dict__.get("__hash__") is not None  # one written in the class
        made = dataclasses.dataclass(cls, kw_only=kw_only)
        if not own_hash:
            shown = cast("type[DataclassInstance]", made)
            keys = tuple(f.name for f in dataclasses.fields(shown) if _hashed(f))
            made.__hash__ = _hash_of(keys)  # type: ignore[method-assign,assignment]
        return made

    return make if cls is None else make(cls)


def _hashed(f: dataclasses.Field[object]) -> bool:
    return f.compare if f.hash is None else f.hash


def _hash_of(keys: tuple[str, ...]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        return hash(tuple(getattr(self, key) for key in keys))

    return __hash__
