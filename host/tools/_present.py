"""Presentation: UI card intents for calls and results, and native tool formats."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from ._json import canonical_json

if TYPE_CHECKING:
    from ._definition import ToolDefinition
    from ._registry import ToolSchema

__all__ = (
    "Card",
    "DiffCard",
    "GenericCard",
    "ReadCard",
    "SearchCard",
    "TerminalCard",
    "WebCard",
    "anthropic_tools",
    "openai_tools",
    "present_call",
    "present_result",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericCard:
    """The fallback card: a title and a text body."""

    kind: Literal["generic"] = "generic"
    title: str
    body: str = ""
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalCard:
    """A command and its output."""

    kind: Literal["terminal"] = "terminal"
    command: str
    output: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffCard:
    """A change to one file, as a unified diff."""

    kind: Literal["diff"] = "diff"
    path: str
    diff: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchCard:
    """A grep/glob search: the query, the items found, whether it was truncated, the total."""

    kind: Literal["search"] = "search"
    query: str
    items: tuple[str, ...] = ()
    truncated: bool = False
    total: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadCard:
    """A file read: path, text, first line number, optional language for highlighting."""

    kind: Literal["read"] = "read"
    path: str
    text: str = ""
    start_line: int = 1
    language: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WebCard:
    """A web search or fetch: the query or URL and the sources."""

    kind: Literal["web"] = "web"
    mode: Literal["search", "fetch"]
    target: str
    items: tuple[str, ...] = ()


Card = GenericCard | TerminalCard | DiffCard | SearchCard | ReadCard | WebCard
_CARDS = (GenericCard, TerminalCard, DiffCard, SearchCard, ReadCard, WebCard)
_log = logging.getLogger("host.tools")


def card_to_dict(card: Card) -> dict[str, Any]:
    """Return a card as a JSON-ready dict."""
    out = asdict(card)
    return {key: list(value) if isinstance(value, tuple) else value for key, value in out.items()}


def _card(
    hook: str, definition: ToolDefinition, build: Callable[..., object], *args: object
) -> Card | None:
    """The tool's own card, or None (logged, as observers are) when its hook fails or misfires."""
    try:
        card = build(*args)
    except Exception:
        _log.exception("%s of %r failed", hook, definition.name)
        return None
    if card is None or isinstance(card, _CARDS):  # None: the tool has no card of its own here
        return card
    if inspect.iscoroutine(card):
        card.close()
    _log.warning("%s of %r returned %s, not a card", hook, definition.name, type(card).__name__)
    return None


def present_call(definition: ToolDefinition, args: Any) -> Card:
    """The card for "about to call": the tool's own ``present_call``, else a generic card."""
    if definition.present_call is not None:
        card = _card("present_call", definition, definition.present_call, args)
        if card is not None:
            return card
    return GenericCard(title=definition.name, body=canonical_json(args, sort_keys=False))


def present_result(definition: ToolDefinition, args: Any, result: Mapping[str, Any]) -> Card:
    """The card for a persisted result dict (``meta.presentation`` included); generic fallback."""
    if definition.present_result is not None:
        card = _card("present_result", definition, definition.present_result, args, result)
        if card is not None:
            return card
    parts = result.get("content") or ()
    body = "\n".join(
        part.get("text", "") if part.get("type") == "text" else f"[{part.get('type')}]"
        for part in parts
        if isinstance(part, Mapping)
    )
    return GenericCard(title=definition.name, body=body, is_error=bool(result.get("is_error")))


def openai_tools(schemas: Iterable[ToolSchema]) -> list[dict[str, Any]]:
    """Tool schemas in the OpenAI function-calling format."""
    return [
        {
            "type": "function",
            "function": {
                "name": entry.name,
                "description": entry.description,
                "parameters": entry.parameters,
            },
        }
        for entry in schemas
    ]


def anthropic_tools(schemas: Iterable[ToolSchema]) -> list[dict[str, Any]]:
    """Tool schemas in the Anthropic tool-use format."""
    return [
        {"name": entry.name, "description": entry.description, "input_schema": entry.parameters}
        for entry in schemas
    ]
