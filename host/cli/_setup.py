"""What every command does first: read the program, load bindings, build the registry."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from host.cli._bindings import SETUP_HOOK, Bindings, BindingsError, load_bindings
from host.cli._errors import UsageFailure
from host.cli._mcp import McpUsageError, mcp_definitions, mcp_specs
from host.tools import ToolDefinition, ToolRegistry, ToolsConfig, ToolsError

if TYPE_CHECKING:
    from host.mcp import McpServerSpec
    from host.sandbox import SubprocessRuntime

__all__ = (
    "ISOLATIONS",
    "POLICIES",
    "RuntimeOptions",
    "check_choice",
    "load_tools",
    "make_registry",
    "mcp_servers",
    "mcp_tools",
    "read_program",
)

POLICIES: Final = ("python", "restricted")
ISOLATIONS: Final = ("auto", "namespaces", "process")


def check_choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a usage error naming them."""
    if value not in choices:
        listed = ", ".join(choices[:-1]) + " or " + choices[-1]
        raise UsageFailure(f"{flag} must be {listed}, not {value!r}")
    return value


@dataclass(frozen=True)
class RuntimeOptions:
    """How a command makes its ``SubprocessRuntime``."""

    isolation: str = "auto"
    max_processes: int = 1024
    use_cgroups: bool = True

    @classmethod
    def checked(cls, isolation: str, max_processes: int, no_cgroups: bool) -> RuntimeOptions:
        """The options, with ``--isolation`` checked."""
        check_choice("--isolation", isolation, ISOLATIONS)
        return cls(isolation, max_processes, not no_cgroups)

    def runtime(self) -> SubprocessRuntime:
        """A new runtime (started by ``async with``)."""
        from host.sandbox import SubprocessRuntime

        return SubprocessRuntime(
            isolation=self.isolation,
            max_processes=self.max_processes,
            use_cgroups=self.use_cgroups,
        )


def read_program(program: str) -> str:
    """The program's text from a file or, for ``-``, from standard input."""
    if program == "-":
        stdin = sys.stdin
        if stdin is None:
            raise UsageFailure("standard input is closed: give a program file, or pipe it in")
        if stdin.isatty():
            sys.stderr.write("dsh-code: reading the program from standard input (end: Ctrl-D)\n")
        try:
            return stdin.read()
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise UsageFailure(f"cannot read the program from standard input: {exc}") from None
    path = Path(program)
    if path.is_dir():
        raise UsageFailure(f"the program {program} is a directory: give a Python file")
    if not path.is_file():
        raise UsageFailure(f"program file not found: {program}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageFailure(f"cannot read {program}: {exc}") from None


def load_tools(paths: list[Path]) -> Bindings:
    """The bindings files' tools; a bad file is a usage error."""
    try:
        return load_bindings(paths)
    except BindingsError as exc:
        raise UsageFailure(str(exc)) from None


def mcp_servers(values: list[str], config: Path | None) -> list[McpServerSpec]:
    """The ``--mcp`` and ``--mcp-config`` servers; a bad value is a usage error."""
    try:
        return mcp_specs(values, config)
    except McpUsageError as exc:
        raise UsageFailure(str(exc)) from None


def mcp_tools(values: list[str], config: Path | None) -> list[ToolDefinition]:
    """The MCP servers' tool definitions, for the commands that only read schemas."""
    try:
        return mcp_definitions(mcp_servers(values, config))
    except McpUsageError as exc:
        raise UsageFailure(str(exc)) from None


def make_registry(
    bindings: Bindings,
    ask_handler: Callable[..., Any] | None,
    extra: list[ToolDefinition] | None = None,
) -> ToolRegistry:
    """A code-mode registry with the bindings' (and MCP servers') tools and set-up hooks."""
    registry = ToolRegistry(ToolsConfig(mode="code"), ask_handler=ask_handler)
    for definition in [*bindings.tools, *(extra or [])]:
        try:
            registry.register(definition)
        except ToolsError as exc:
            raise UsageFailure(f"cannot register the tool {definition.name!r}: {exc}") from None
    for setup in bindings.setups:
        try:
            setup(registry)
        except Exception as exc:
            raise UsageFailure(
                f"{SETUP_HOOK}() of a bindings file failed: {type(exc).__name__}: {exc}"
            ) from None
    return registry
