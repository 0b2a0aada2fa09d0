"""A state file's shape is told in one quick pass when it is right, and, when it is
wrong, by a message that says where: both passes judge every value alike."""

from __future__ import annotations

import copy
import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

import pytest

from forge.base.shape import as_int, as_object, number, problem


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Leaf:
    name: str
    size: int = 0


@dataclass
class Tree:
    colour: Colour
    ratio: float
    leaves: list[Leaf] = field(default_factory=list)
    tags: dict[str, int] = field(default_factory=dict)
    parent: Tree | None = None
    note: str | None = None


GOOD: dict[str, Any] = {
    "colour": Colour.RED.value,
    "ratio": 1,
    "leaves": [{"name": "a"}, {"name": "b", "size": 2}],
    "tags": {"x": 1},
    "parent": {"colour": "blue", "ratio": 0.5, "note": None},
    "unknown to this forge": [1, 2],
}


def test_a_record_of_the_right_shape_has_no_problem() -> None:
    assert problem(Tree, GOOD) is None
    tree = Tree(colour=Colour.BLUE, ratio=0.5, leaves=[Leaf("a", 1)])
    data = {**dataclasses.asdict(tree), "colour": tree.colour.value}
    assert data["leaves"][0] == {"name": tree.leaves[0].name, "size": 1}
    assert problem(Tree, data) is None


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (("colour",), "green", "`colour` is a string, not one of ['red', 'blue']"),
        (("colour",), ["red"], "`colour` is a list, not one of"),
        (("ratio",), True, "`ratio` is a boolean"),
        (("ratio",), "1", "`ratio` is a string"),
        (("leaves",), {}, "`leaves` is an object, not a list"),
        (("leaves", 1, "size"), 2.5, "`leaves[1].size` is the number 2.5"),
        (("leaves", 0), "a", "leaves[0] is a string, not an object"),
        (("tags", "x"), None, "`tags.x` is null"),
        (("parent", "colour"), 3, "`parent.colour` is the number 3"),
        (("parent", "note"), 7, "`parent.note` is the number 7"),
    ],
)
def test_a_wrong_value_is_named_where_it_is(path: tuple[Any, ...], value: Any, said: str) -> None:
    data = copy.deepcopy(GOOD)
    at: Any = data
    for step in path[:-1]:
        at = at[step]
    at[path[-1]] = value
    why = problem(Tree, data)
    assert why is not None and why.startswith(said), why


def test_a_missing_field_without_default_and_a_top_level_that_is_no_object() -> None:
    data = {k: v for k, v in GOOD.items() if k != "ratio"}
    assert problem(Tree, data) == "`ratio` is missing"
    assert problem(Tree, []) == "the top level is a list, not an object"


def test_json_read_as_it_came_is_narrowed_as_int_and_float_would_read_it() -> None:
    assert as_object({"a": 1}) == {"a": 1} and as_object([1]) is None
    assert [number(v) for v in (3, 2.5, True, "3", None)] == [3, 2.5, None, None, None]
    assert [as_int(v) for v in (3, 2.9, "7")] == [3, 2, 7]
    odd: tuple[object, ...] = (None, [1], {})
    for bad in odd:
        with pytest.raises(TypeError) as raised:
            as_int(bad)
        with pytest.raises(TypeError) as by_int:
            int(bad)  # type: ignore[call-overload]
        assert str(raised.value) == str(by_int.value)
