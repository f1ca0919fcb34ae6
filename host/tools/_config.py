"""The settings of a registry and of its guard plugins, and the small types they share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = (
    "MODES",
    "Disposer",
    "PresentationMode",
    "RepeatReminderConfig",
    "ToolsConfig",
)

PresentationMode = Literal["native", "code", "both"]
MODES: Final = ("native", "code", "both")

Disposer = Callable[[], None]
"""Undo a registration (a tool, mask, hook or observer); calling it twice does nothing."""


@dataclass(frozen=True, slots=True)
class RepeatReminderConfig:
    """Settings of the repeat-tool reminder."""

    thresholds: tuple[int, ...] = (3, 5, 8)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("todo_write",)
    arguments_preview_chars: int = 500


@dataclass(frozen=True, slots=True)
class ToolsConfig:
    """Registry settings: default presentation mode, batch pool size, guard plugins."""

    mode: PresentationMode = "native"
    max_parallel_tool_calls: int = 10
    timeout_policy: bool = True
    repeat_reminder: RepeatReminderConfig | None = field(default_factory=RepeatReminderConfig)
