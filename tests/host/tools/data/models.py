"""A dozen realistic pydantic models whose JSON Schemas join the corpus (see regen.py)."""

from __future__ import annotations

import datetime
import enum
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field


class Priority(enum.StrEnum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str
    city: str
    zip: Annotated[str, Field(pattern=r"^[0-9]{5}$")]
    country: str = "US"


class Person(BaseModel):
    """A person with optional contact data."""

    name: Annotated[str, Field(min_length=1, max_length=80, description="Full name")]
    email: str | None = None
    age: Annotated[int, Field(ge=0, le=150)] | None = None
    address: Address | None = None


class Ticket(BaseModel):
    title: str
    priority: Priority = Priority.LOW
    assignees: list[Person] = []
    due: datetime.date | None = None
    labels: Annotated[list[str], Field(max_length=5)] = []


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: Annotated[float, Field(gt=0)]


class Square(BaseModel):
    kind: Literal["square"]
    side: Annotated[float, Field(gt=0)]


class Drawing(BaseModel):
    shapes: list[Annotated[Circle | Square, Field(discriminator="kind")]]
    scale: Annotated[float, Field(multiple_of=0.5)] = 1.0


class Category(BaseModel):
    """A category tree."""

    name: str
    children: list[Category] = []


class Money(BaseModel):
    amount: Annotated[int, Field(ge=0, description="In cents")]
    currency: Literal["USD", "EUR"]


class LineItem(BaseModel):
    sku: str
    quantity: Annotated[int, Field(gt=0)]
    price: Money


class Order(BaseModel):
    id: uuid.UUID
    placed_at: datetime.datetime
    items: Annotated[list[LineItem], Field(min_length=1)]
    shipping: Address
    billing: Address | None = None
    note: str | None = None


class SearchFilter(BaseModel):
    field: str
    op: Literal["eq", "lt", "gt", "in"]
    value: str | int | float | list[str]


class SearchRequest(BaseModel):
    query: str
    filters: list[SearchFilter] = []
    page: Annotated[int, Field(ge=1)] = 1
    sort: dict[str, Literal["asc", "desc"]] = {}


class Settings(BaseModel):
    model_config = {"extra": "forbid"}
    theme: Literal["light", "dark"] = "light"
    notifications: bool = True
    timeout_s: Annotated[float, Field(gt=0, lt=3600)] = 30.0


class Event(BaseModel):
    name: str
    at: datetime.datetime
    attendees: list[Person]
    metadata: dict[str, Any] = {}


MODELS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (
        Address, Person, Ticket, Drawing, Category, Money, LineItem, Order,
        SearchFilter, SearchRequest, Settings, Event,
    )
}  # fmt: skip

ADDRESS = {"street": "1 Main St", "city": "Springfield", "zip": "12345"}
# For each model: values it accepts, and values it rejects with the path of the first error.
EXAMPLES: dict[str, dict[str, Any]] = {
    "Address": {
        "valid": [ADDRESS, {**ADDRESS, "country": "CA"}],
        "invalid": [
            ({**ADDRESS, "zip": "1234"}, "$.zip"),
            ({"street": "s", "zip": "12345"}, "$.city"),
        ],
    },
    "Person": {
        "valid": [{"name": "Ada"}, {"name": "Ada", "age": None, "address": ADDRESS}],
        "invalid": [({"name": ""}, "$.name"), ({"name": "Ada", "age": -1}, "$.age")],
    },
    "Ticket": {
        "valid": [
            {"title": "t"},
            {"title": "t", "priority": "high", "due": "2024-01-31", "assignees": [{"name": "B"}]},
        ],
        "invalid": [
            ({"title": "t", "priority": "urgent"}, "$.priority"),
            ({"title": "t", "labels": list("abcdef")}, "$.labels"),
        ],
    },
    "Drawing": {
        "valid": [{"shapes": [{"kind": "circle", "radius": 1}, {"kind": "square", "side": 2.5}]}],
        "invalid": [
            ({"shapes": [{"kind": "circle", "radius": 0}]}, "$.shapes[0]"),
            ({"shapes": [], "scale": 0.3}, "$.scale"),
        ],
    },
    "Category": {
        "valid": [{"name": "root", "children": [{"name": "a", "children": [{"name": "b"}]}]}],
        "invalid": [({"name": "root", "children": [{"children": []}]}, "$.children[0].name")],
    },
    "Money": {
        "valid": [{"amount": 0, "currency": "EUR"}],
        "invalid": [
            ({"amount": 1.5, "currency": "EUR"}, "$.amount"),
            ({"amount": 1, "currency": "GBP"}, "$.currency"),
        ],
    },
    "LineItem": {
        "valid": [{"sku": "a", "quantity": 1, "price": {"amount": 5, "currency": "USD"}}],
        "invalid": [
            ({"sku": "a", "quantity": 0, "price": {"amount": 5, "currency": "USD"}}, "$.quantity")
        ],
    },
    "Order": {
        "valid": [
            {
                "id": "6f1c2b0e-9a55-4c1e-8a4e-1e2f3a4b5c6d",
                "placed_at": "2024-05-01T10:00:00Z",
                "items": [{"sku": "a", "quantity": 2, "price": {"amount": 5, "currency": "USD"}}],
                "shipping": ADDRESS,
            }
        ],
        "invalid": [
            (
                {"id": "x", "placed_at": "2024-05-01T10:00:00Z", "items": [], "shipping": ADDRESS},
                "$.items",
            ),
            (
                {
                    "id": "x",
                    "placed_at": "t",
                    "items": [
                        {"sku": "a", "quantity": 1, "price": {"amount": 1, "currency": "USD"}}
                    ],
                    "shipping": {},
                },
                "$.shipping.street",
            ),
        ],
    },
    "SearchFilter": {
        "valid": [
            {"field": "f", "op": "in", "value": ["a"]},
            {"field": "f", "op": "lt", "value": 3},
        ],
        "invalid": [({"field": "f", "op": "in", "value": {"a": 1}}, "$.value")],
    },
    "SearchRequest": {
        "valid": [
            {
                "query": "q",
                "sort": {"date": "desc"},
                "filters": [{"field": "f", "op": "eq", "value": "x"}],
            }
        ],
        "invalid": [
            ({"query": "q", "page": 0}, "$.page"),
            ({"query": "q", "sort": {"date": "up"}}, "$.sort.date"),
        ],
    },
    "Settings": {
        "valid": [{}, {"theme": "dark", "timeout_s": 10}],
        "invalid": [
            ({"theme": "blue"}, "$.theme"),
            ({"colour": "red"}, "$.colour"),
            ({"timeout_s": 3600}, "$.timeout_s"),
        ],
    },
    "Event": {
        "valid": [
            {
                "name": "n",
                "at": "2024-05-01T10:00:00Z",
                "attendees": [],
                "metadata": {"k": [1, None]},
            }
        ],
        "invalid": [
            (
                {"name": "n", "at": "2024-05-01T10:00:00Z", "attendees": [{"age": 3}]},
                "$.attendees[0].name",
            )
        ],
    },
}
