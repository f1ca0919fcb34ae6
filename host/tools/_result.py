"""Tool results: the one success/failure shape, error codes, content parts and contexts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from ._json import FrozenDict, FrozenList, freeze, thaw

__all__ = (
    "ErrorCode",
    "ToolFailure",
    "ToolResult",
    "normalize_content",
    "user_context",
)


class ErrorCode(StrEnum):
    """The closed set of failure codes a tool result can carry."""

    INVALID_ARGS = "INVALID_ARGS"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    DENIED = "DENIED"
    GUARD_REJECTED = "GUARD_REJECTED"
    TOOL_ERROR = "TOOL_ERROR"
    OUTPUT_INVALID = "OUTPUT_INVALID"
    TOOL_TIMEOUT = "TOOL_TIMEOUT"
    ABORTED = "ABORTED"
    ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
    CODE_RUN_FAILED = "CODE_RUN_FAILED"
    PAUSED = "PAUSED"


_ERROR_NAMES: Final = {
    ErrorCode.INVALID_ARGS: "ToolArgsError",
    ErrorCode.UNKNOWN_TOOL: "UnknownToolError",
    ErrorCode.DENIED: "ToolDeniedError",
    ErrorCode.GUARD_REJECTED: "ToolGuardRejectedError",
    ErrorCode.TOOL_ERROR: "ToolExecutionError",
    ErrorCode.OUTPUT_INVALID: "ToolOutputError",
    ErrorCode.TOOL_TIMEOUT: "ToolTimeoutError",
    ErrorCode.ABORTED: "ToolAbortedError",
    ErrorCode.ABORTED_BEFORE_DISPATCH: "ToolAbortedError",
    ErrorCode.CODE_RUN_FAILED: "CodeRunFailedError",
    ErrorCode.PAUSED: "ToolPausedError",
}


def normalize_content(content: Any) -> FrozenList:
    """Turn a string, one part or a list of parts into a frozen list of content parts."""
    if isinstance(content, str):  # built frozen at once: the same as freezing the plain list
        return FrozenList([FrozenDict(type="text", text=content)])
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, Sequence):
        raise TypeError(
            f"content must be a string or a list of parts, got {type(content).__name__}"
        )
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
            continue
        if not isinstance(part, Mapping):
            raise TypeError(f"content part {index} is a {type(part).__name__}, not a mapping")
        kind = part.get("type")
        if (kind == "text" and isinstance(part.get("text"), str)) or (
            kind == "image"
            and isinstance(part.get("data"), str)
            and isinstance(part.get("mime_type"), str)
        ):
            parts.append(dict(part))
        else:
            raise TypeError(f"content part {index} is neither a text nor an image part: {part!r}")
    return freeze(parts)  # type: ignore[no-any-return]


def user_context(content: Any, *, source: Mapping[str, Any] | None = None) -> FrozenDict:
    """Build an additional context: a user message with content parts and optional provenance."""
    if isinstance(content, Mapping) and content.get("role") == "user":
        message = dict(content)
        message["content"] = normalize_content(message.get("content", ""))
        return freeze(message)  # type: ignore[no-any-return]
    message = {"role": "user", "content": normalize_content(content)}
    if source is not None:
        message["source"] = dict(source)
    return freeze(message)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class WithContent:
    """Returned by a tool body: ``value`` as usual, plus content ``parts`` (e.g. images)
    appended after the rendered content the model sees."""

    value: Any
    parts: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class ToolFailure:
    """Why a tool call failed: a message, an error ``name`` and one ``ErrorCode``."""

    message: str
    name: str
    code: ErrorCode

    def to_dict(self) -> dict[str, Any]:
        """Return ``{message, info: {name, code}}``."""
        return {"message": self.message, "info": {"name": self.name, "code": str(self.code)}}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A frozen tool result: success (``value``) or failure (``error``), plus model content."""

    is_error: bool
    content: FrozenList
    value: Any = None
    error: ToolFailure | None = None
    meta: FrozenDict | None = None
    additional_contexts: tuple[FrozenDict, ...] = ()

    @classmethod
    def success(
        cls,
        value: Any,
        content: Any,
        *,
        meta: Mapping[str, Any] | None = None,
        additional_contexts: Sequence[Any] = (),
    ) -> ToolResult:
        """Build a success result (the value and content are frozen)."""
        return cls(
            is_error=False,
            value=freeze(value),
            content=normalize_content(content),
            meta=None if meta is None else freeze(dict(meta)),
            additional_contexts=tuple(user_context(c) for c in additional_contexts),
        )

    @classmethod
    def failure(
        cls,
        code: ErrorCode,
        message: str,
        *,
        name: str | None = None,
        content: Any = None,
        meta: Mapping[str, Any] | None = None,
        additional_contexts: Sequence[Any] = (),
    ) -> ToolResult:
        """Build a failure result; content defaults to ``Error: <message>``."""
        return cls(
            is_error=True,
            content=normalize_content(f"Error: {message}" if content is None else content),
            error=ToolFailure(message, name or _ERROR_NAMES[code], ErrorCode(code)),
            meta=None if meta is None else freeze(dict(meta)),
            additional_contexts=tuple(user_context(c) for c in additional_contexts),
        )

    @property
    def code(self) -> ErrorCode | None:
        """The failure code, or None for a success."""
        return None if self.error is None else self.error.code

    def replace(self, **changes: Any) -> ToolResult:
        """Return a copy with some fields changed (content is normalized, values frozen)."""
        if "content" in changes:
            changes["content"] = normalize_content(changes["content"])
        if "value" in changes:
            changes["value"] = freeze(changes["value"])
        if "meta" in changes and changes["meta"] is not None:
            changes["meta"] = freeze(dict(changes["meta"]))
        if "additional_contexts" in changes:
            changes["additional_contexts"] = tuple(
                user_context(c) for c in changes["additional_contexts"]
            )
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready result dict (plain containers; absent keys omitted)."""
        out: dict[str, Any] = {"is_error": self.is_error}
        if self.error is None:
            out["value"] = thaw(self.value)
        else:
            out["error"] = self.error.to_dict()
        out["content"] = thaw(self.content)
        if self.meta is not None:
            out["meta"] = thaw(self.meta)
        if self.additional_contexts:
            out["additional_contexts"] = [thaw(c) for c in self.additional_contexts]
        return out
