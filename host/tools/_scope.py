"""Tool scopes: the registry's global scope and agent scopes, their masks and name resolution."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol

from ._config import MODES, Disposer, PresentationMode, ToolsConfig
from ._definition import ToolDefinition
from ._exceptions import ReservedToolNameError, ScopeError, ToolDefinitionError

__all__ = ("RUN_CODE", "Mask", "Scope", "ScopeOwner", "add_tool", "resolve", "tool_names")

RUN_CODE: Final = "run_code"
"""The reserved name of code mode's transport tool."""


class ScopeOwner(Protocol):
    """What a scope needs from its registry: the settings, and registering into the scope."""

    @property
    def config(self) -> ToolsConfig: ...

    def register(self, definition: ToolDefinition, *, scope: Scope | None = None) -> Disposer: ...


@dataclass(frozen=True, slots=True)
class Mask:
    """An agent scope's filter of inherited tools: an allow list or a deny list."""

    allow: frozenset[str] | None
    deny: frozenset[str] | None

    def passes(self, name: str) -> bool:
        """True when a tool called ``name`` stays visible through this mask."""
        if self.allow is not None:
            return name in self.allow
        return self.deny is None or name not in self.deny


class Scope:
    """A visibility scope: a registry's global scope, or an agent scope (a child of another)."""

    __slots__ = ("__weakref__", "_masks", "_mode", "_own", "label", "parent", "registry")

    def __init__(self, registry: ScopeOwner, parent: Scope | None, label: str) -> None:
        self.registry = registry
        self.parent = parent
        self.label = label
        self._own: dict[str, ToolDefinition] = {}
        self._masks: list[Mask] = []
        self._mode: PresentationMode | None = None

    def __repr__(self) -> str:
        return f"<Scope {self.label}>"

    @property
    def is_agent(self) -> bool:
        """True for an agent scope, False for the registry's global scope."""
        return self.parent is not None

    def register(self, definition: ToolDefinition) -> Disposer:
        """Register a tool in this scope (shadowing inherited ones); return its disposer."""
        return self.registry.register(definition, scope=self)

    def restrict(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Mask inherited tools: an allow or a deny list (agent scopes only); return a disposer."""
        if not self.is_agent:
            raise ScopeError("restrict() is only available on an agent scope")
        if (allow is None) == (deny is None):
            raise ValueError("restrict() takes exactly one of allow= or deny=")
        names = frozenset([allow] if isinstance(allow, str) else allow or ())
        names |= frozenset([deny] if isinstance(deny, str) else deny or ())
        if RUN_CODE in names:
            raise ReservedToolNameError(f"{RUN_CODE!r} is reserved and cannot be restricted")
        mask = Mask(names if allow is not None else None, names if deny is not None else None)
        self._masks.append(mask)

        def dispose() -> None:
            if mask in self._masks:
                self._masks.remove(mask)

        return dispose

    def present_as(self, mode: PresentationMode) -> None:
        """Set this agent's presentation mode, shadowing the config default."""
        if not self.is_agent:
            raise ScopeError("present_as() is only available on an agent scope")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._mode = mode

    @property
    def mode(self) -> PresentationMode:
        """The effective presentation mode: this agent's own choice, else the config default."""
        return self._mode or self.registry.config.mode


def add_tool(scope: Scope, definition: ToolDefinition) -> Disposer:
    """Put ``definition`` in ``scope`` itself (the registry checked it); return its disposer."""
    own = scope._own
    if definition.name in own:
        raise ToolDefinitionError(f"{definition.name!r} is already registered in {scope}")
    own[definition.name] = definition

    def dispose() -> None:
        if own.get(definition.name) is definition:
            del own[definition.name]

    return dispose


def resolve(scope: Scope, name: str) -> ToolDefinition | None:
    """The definition ``name`` resolves to from ``scope``: the nearest one, if the masks
    between pass it."""
    current: Scope | None = scope
    masks: list[Mask] = []
    while current is not None:
        definition = current._own.get(name)
        if definition is not None:
            return definition if all(mask.passes(name) for mask in masks) else None
        masks.extend(current._masks)
        current = current.parent
    return None


def tool_names(scope: Scope) -> Iterator[str]:
    """The names defined in ``scope`` and its ancestors, masked or not (repeats possible)."""
    current: Scope | None = scope
    while current is not None:
        yield from current._own
        current = current.parent
