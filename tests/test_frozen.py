"""`@frozen` records behave as frozen dataclasses do, save the run-time refusal of an
assignment, which the type checker makes instead (`_assigns_a_field`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import forge.frozen as frozen_module
from forge.frozen import frozen


@frozen
class Point:
    x: int
    y: int
    note: str = dataclasses.field(default="", compare=False)


@frozen(kw_only=True)
class Named(Point):
    name: str = ""


def test_equal_records_hash_alike_and_the_hash_is_the_frozen_dataclasses() -> None:
    @dataclasses.dataclass(frozen=True)
    class Reference:
        x: int
        y: int
        note: str = dataclasses.field(default="", compare=False)

    assert Point(1, 2) == Point(1, 2, note="other")
    assert hash(Point(1, 2)) == hash(Point(1, 2, note="other")) == hash(Reference(1, 2))
    assert {Point(1, 2): "a"}[Point(1, 2)] == "a"
    assert len({Point(1, 2), Point(1, 2), Point(2, 1)}) == 2


def test_a_subclass_hashes_its_own_fields_too() -> None:
    assert Named(1, 2, name="a") != Named(1, 2, name="b")
    assert hash(Named(1, 2, name="a")) != hash(Named(1, 2, name="b"))
    assert dataclasses.replace(Named(1, 2, name="a"), name="b") == Named(1, 2, name="b")
    with pytest.raises(TypeError):
        Named(1, 2, "n", "a")  # type: ignore[call-arg]  # name is keyword-only


def test_a_hash_written_in_the_class_is_kept() -> None:
    @frozen
    class Own:
        x: int

        def __hash__(self) -> int:
            return 7

    assert hash(Own(1)) == 7


def _assigns_a_field(p: Point) -> None:
    """Never called: checked by `mypy --strict` (CI), which reports the ignore below
    as unused the moment it stops seeing the record as frozen."""
    p.x = 3  # type: ignore[misc]


def test_forge_defines_its_records_with_frozen() -> None:
    """`dataclass(frozen=True)` costs each forge process tens of milliseconds at start
    (forge/frozen.py): the package's records use `@frozen`."""
    package = Path(frozen_module.__file__ or "").parent
    slow = [
        str(m.relative_to(package))
        for m in package.rglob("*.py")
        if "dataclass(frozen=True" in m.read_text() and m.name != "frozen.py"
    ]
    assert slow == []
