"""Python types as tool parameters: pydantic models, dataclasses, enums, TypedDicts, dates."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import subprocess
import sys
import uuid
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import annotated_types
import pydantic
import pytest

from host.tools import ToolRegistry, hint_to_node, to_json_schema, tool, validate

pytestmark = pytest.mark.anyio


class Address(pydantic.BaseModel):
    street: str
    zip: Annotated[str, pydantic.Field(pattern=r"^\d{5}$")]


class Query(pydantic.BaseModel):
    """What to search for."""

    text: str
    limit: int = 10
    tags: list[str] = []
    near: Address | None = None


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str = "origin"


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


class Tree(TypedDict):
    value: int
    kids: NotRequired[list[Tree]]


seen: dict[str, Any] = {}


@tool
def search(query: Query, color: Color = Color.RED, level: Level | None = None) -> list[str]:
    """Search."""
    seen.update(query=query, color=color, level=level)
    return [query.text] * query.limit


@tool
def plot(
    where: Point,
    tree: Node,
    when: datetime.datetime,
    day: datetime.date,
    key: uuid.UUID,
    size: Annotated[int, annotated_types.Interval(ge=1, le=9)] = 3,
    kind: Literal["dot", "cross"] = "dot",
) -> Point:
    """Plot a point."""
    seen.update(where=where, tree=tree, when=when, day=day, key=key)
    return Point(where.x + size, where.y, kind)


@tool
def count(tree: Tree) -> int:
    """Count the nodes of a tree."""
    return 1 + sum(int(count(kid)) for kid in tree.get("kids", []))


async def test_a_pydantic_model_arrives_as_an_instance() -> None:
    registry = ToolRegistry()
    registry.register(search)
    result = await registry.invoke(
        "search", {"query": {"text": "x", "limit": 2, "near": {"street": "s", "zip": "12345"}}}
    )
    assert result.to_dict()["value"] == ["x", "x"]
    assert isinstance(seen["query"], Query)
    assert isinstance(seen["query"].near, Address)
    assert seen["color"] is Color.RED
    result = await registry.invoke("search", {"query": {"text": "x"}, "color": "green", "level": 2})
    assert seen == {**seen, "color": Color.GREEN, "level": Level.HIGH}


async def test_model_constraints_are_checked_with_their_paths() -> None:
    registry = ToolRegistry()
    registry.register(search)
    bad = await registry.invoke("search", {"query": {"text": "x", "near": {"street": "s"}}})
    assert bad.is_error
    assert bad.error is not None
    assert bad.error.message == (
        "invalid arguments for search: $.query.near: expected a value matching one of 2"
        " alternatives, none did (closest, alternative 1: $.query.near.zip: missing required"
        " property)"
    )
    bad = await registry.invoke("search", {"query": {"text": "x"}, "color": "blue"})
    assert bad.error is not None
    assert bad.error.message == (
        'invalid arguments for search: $.color: expected one of ["red", "green"], got string "blue"'
    )


def test_a_model_parameter_hoists_its_defs_to_the_root() -> None:
    params = to_json_schema(search.parameters)
    assert params["properties"]["query"]["title"] == "Query"
    assert params["properties"]["query"]["description"] == "What to search for."
    assert params["$defs"]["Address"]["properties"]["zip"]["pattern"] == r"^\d{5}$"
    assert params["properties"]["color"] == {
        "type": "string",
        "title": "Color",
        "enum": ["red", "green"],
        "default": "red",
    }
    assert validate(search.parameters, {"query": {"text": "x", "near": None}}) is None


async def test_dataclasses_dates_and_uuids_convert_both_ways() -> None:
    registry = ToolRegistry()
    registry.register(plot)
    key = uuid.uuid4()
    result = await registry.invoke(
        "plot",
        {
            "where": {"x": 1, "y": 2},
            "tree": {"name": "r", "children": [{"name": "c"}]},
            "when": "2024-05-01T10:00:00Z",
            "day": "2024-05-01",
            "key": str(key),
        },
    )
    assert result.to_dict()["value"] == {"x": 4, "y": 2, "label": "dot"}, result
    assert seen["where"] == Point(1, 2)
    assert seen["tree"] == Node("r", [Node("c")])
    assert seen["when"] == datetime.datetime(2024, 5, 1, 10, tzinfo=datetime.UTC)
    assert seen["day"] == datetime.date(2024, 5, 1)
    assert seen["key"] == key
    bad = await registry.invoke(
        "plot",
        {
            "where": {"x": 1, "y": 2},
            "tree": {"name": "r"},
            "when": "2024-05-01 10:00",
            "day": "x",
            "key": "k",
        },
    )
    assert bad.error is not None
    assert bad.error.message == (
        'invalid arguments for plot: $.day: expected string in format date, got string "x"'
    )


def test_recursive_types_become_defs() -> None:
    params = to_json_schema(plot.parameters)
    assert params["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert params["properties"]["tree"] == {"$ref": "#/$defs/Node"}
    assert params["properties"]["size"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 9,
        "default": 3,
    }
    assert to_json_schema(hint_to_node(Tree)) == {
        "$ref": "#/$defs/Tree",
        "$defs": {
            "Tree": {
                "type": "object",
                "title": "Tree",
                "properties": {
                    "value": {"type": "integer"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
                },
                "required": ["value"],
                "additionalProperties": False,
            }
        },
    }


async def test_a_recursive_typed_dict_validates_deep_values() -> None:
    registry = ToolRegistry()
    registry.register(count)
    tree: dict[str, Any] = {"value": 0}
    for depth in range(50):
        tree = {"value": depth, "kids": [tree]}
    assert (await registry.invoke("count", {"tree": tree})).to_dict()["value"] == 51
    bad = await registry.invoke("count", {"tree": {"value": 1, "kids": [{"value": "x"}]}})
    assert bad.error is not None
    assert bad.error.message == (
        'invalid arguments for count: $.tree.kids[0].value: expected integer, got string "x"'
    )


def test_the_output_schema_of_a_model_is_its_serialization_schema() -> None:
    @tool
    def make(text: str) -> Query:
        """Make a query."""
        return Query(text=text)

    assert make.output is not None
    assert to_json_schema(make.output.schema)["title"] == "Query"


def test_pydantic_is_never_imported_by_host_tools() -> None:
    code = (
        "import sys, dataclasses, enum\n"
        "from host.tools import tool\n"
        "@dataclasses.dataclass\n"
        "class P:\n    x: int\n"
        "class E(enum.Enum):\n    A = 'a'\n"
        "@tool\n"
        "def f(p: P, e: E) -> P:\n    return p\n"
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
