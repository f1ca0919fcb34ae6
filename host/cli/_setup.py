"""What every command does first: read the program, load bindings, build the registry."""

from __future__ import annotations

import io
import sys
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from host.cli._bindings import SETUP_HOOK, Bindings, BindingsError, load_bindings
from host.cli._errors import UsageFailure
from host.cli._mcp import McpUsageError, mcp_definitions, mcp_specs
from host.cli._options import MODEL_OUTPUT_BYTES
from host.codemode import CodeModeConfig
from host.tools import ToolDefinition, ToolRegistry, ToolsConfig, ToolsError
from runtime import Limits, RuntimeEnvironmentError, RuntimeUsageError

if TYPE_CHECKING:
    from host.mcp import McpServerSpec
    from runtime import CodeRuntime

__all__ = (
    "CALL_STYLES",
    "ISOLATIONS",
    "POLICIES",
    "RuntimeOptions",
    "check_choice",
    "check_typescript_flags",
    "codemode_config_of",
    "decode_program",
    "language_of",
    "load_tools",
    "make_registry",
    "mcp_servers",
    "mcp_tools",
    "read_program",
    "unwrap_usage",
)

POLICIES: Final = ("python", "restricted")
ISOLATIONS: Final = ("auto", "namespaces", "process")
CALL_STYLES: Final = ("async", "sync")


def check_choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a usage error naming them."""
    if value not in choices:
        listed = ", ".join(choices[:-1]) + " or " + choices[-1]
        raise UsageFailure(f"{flag} must be {listed}, not {value!r}")
    return value


#: The languages programs may be written in, and the file names that say TypeScript.
LANGUAGES = ("python", "typescript")
_TYPESCRIPT_SUFFIXES = (".ts", ".mts", ".cts")


def language_of(lang: str | None, program: str | None = None) -> str:
    """``--lang``, else what the program file's name says (``.ts``: typescript), else python."""
    if lang is not None:
        return check_choice("--lang", lang, LANGUAGES)
    if program is not None and program.endswith(_TYPESCRIPT_SUFFIXES):
        return "typescript"
    return "python"


def check_typescript_flags(
    language: str, *, policy: str = "python", call_style: str = "async", session: bool = False
) -> None:
    """A usage error for a flag TypeScript programs cannot have."""
    if language != "typescript":
        return
    if session:
        raise UsageFailure(
            "--session is for Python programs: a TypeScript run keeps no state for the next "
            "(sessions are not available for TypeScript)"
        )
    if policy != "python":
        raise UsageFailure("--policy restricted is for Python programs")
    if call_style != "async":
        raise UsageFailure("--call-style sync is for Python programs (TypeScript awaits calls)")


@dataclass(frozen=True)
class RuntimeOptions:
    """How a command makes its runtime: a ``SubprocessRuntime``, or a ``RayRuntime`` (``--ray``)."""

    isolation: str = "auto"
    max_processes: int = 1024
    use_cgroups: bool = True
    preload: tuple[str, ...] = ()
    ray: str | None = None
    cluster: CodeRuntime | None = field(default=None, compare=False, repr=False)
    """The ``RayRuntime`` made (and so checked) when the flags were read."""
    language: str = "python"
    """The programs' language: a ``TypeScriptRuntime`` runs TypeScript."""
    hash_seed: int | None = None
    """The children's hash seed (``resume``: the journal's), else one the runtime draws."""

    @classmethod
    def checked(
        cls,
        isolation: str,
        max_processes: int,
        no_cgroups: bool,
        preload: list[str] | tuple[str, ...] = (),
        ray: str | None = None,
        language: str = "python",
        hash_seed: int | None = None,
    ) -> RuntimeOptions:
        """The options, with ``--isolation`` and ``--preload`` checked, and ``--ray``'s
        runtime made (a missing extra or a bad address is a usage error here)."""
        check_choice("--isolation", isolation, ISOLATIONS)
        if language == "typescript":
            if preload:
                raise UsageFailure("--preload imports Python modules: it is for Python programs")
            if ray is not None:
                raise UsageFailure("--ray runs Python programs only (TypeScript runs locally)")
            return cls(isolation, max_processes, not no_cgroups, language=language)
        for module in preload:
            if not module or not all(part.isidentifier() for part in module.split(".")):
                raise UsageFailure(f"--preload takes a module name (like numpy), not {module!r}")
        options = cls(
            isolation,
            max_processes,
            not no_cgroups,
            tuple(dict.fromkeys(preload)),
            hash_seed=hash_seed,
        )
        if ray is None:
            return options
        from host.cluster import ClusterError, ray_runtime_from_flag

        try:
            cluster = ray_runtime_from_flag(ray, options.subprocess_options())
        except ClusterError as exc:
            raise UsageFailure(str(exc)) from None
        return cls(
            options.isolation,
            max_processes,
            options.use_cgroups,
            options.preload,
            ray,
            cluster,
            hash_seed=hash_seed,
        )

    def subprocess_options(self) -> dict[str, Any]:
        """The keyword arguments of the ``SubprocessRuntime`` (JSON: they may go to a cluster)."""
        options: dict[str, Any] = {
            "isolation": self.isolation,
            "max_processes": self.max_processes,
            "use_cgroups": self.use_cgroups,
        }
        if self.preload:
            options["preload"] = list(self.preload)
        if self.hash_seed is not None:
            options["hash_seed"] = self.hash_seed
        return options

    def runtime(self) -> CodeRuntime:
        """The runtime (started by ``async with``)."""
        if self.cluster is not None:
            return self.cluster
        from host.sandbox import SubprocessRuntime, TypeScriptRuntime

        if self.language == "typescript":
            return TypeScriptRuntime(
                isolation=self.isolation,
                max_processes=self.max_processes,
                use_cgroups=self.use_cgroups,
            )

        return SubprocessRuntime(**self.subprocess_options())


def read_program(program: str) -> str:
    """The program's text from a file or, for ``-``, from standard input, decoded as
    ``python prog.py`` decodes a file (UTF-8, or the encoding its PEP 263 line declares)."""
    if program == "-":
        stdin = sys.stdin
        if stdin is None:
            raise UsageFailure("standard input is closed: give a program file, or pipe it in")
        if stdin.isatty():
            sys.stderr.write("dsh-code: reading the program from standard input (end: Ctrl-D)\n")
        try:
            binary = getattr(stdin, "buffer", None)
            data = binary.read() if binary is not None else stdin.read().encode()
        except (OSError, ValueError, UnicodeError) as exc:
            raise UsageFailure(f"cannot read the program from standard input: {exc}") from None
        return decode_program(data, "<stdin>")
    path = Path(program)
    if path.is_dir():
        raise UsageFailure(f"the program {program} is a directory: give a Python file")
    if not path.is_file():
        raise UsageFailure(f"program file not found: {program}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageFailure(f"cannot read {program}: {exc}") from None
    return decode_program(data, program)


def decode_program(data: bytes, name: str) -> str:
    """Source bytes as text, as Python decodes a script: a UTF-8 BOM, else the encoding a
    PEP 263 coding line declares, else UTF-8; what does not decode is a usage error."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown encoding, a BOM it contradicts, or not UTF-8 at all
        encoding = "utf-8"
        message = exc.msg
    else:
        message = ""
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        declared = "utf-8" if encoding == "utf-8-sig" else encoding
        how = (
            "save it as UTF-8, or declare its encoding on its first or second line "
            "(PEP 263: # -*- coding: latin-1 -*-)"
            if declared == "utf-8"
            else f"its coding line declares {declared}"
        )
        raise UsageFailure(
            f"{name}: line {line}: byte 0x{data[exc.start]:02x} is not {declared}: {how}"
        ) from None
    if message:
        raise UsageFailure(f"{name}: {message}")
    return text


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


def mcp_tools(
    values: list[str], config: Path | None, start_timeout_ms: int
) -> list[ToolDefinition]:
    """The MCP servers' tool definitions, for the commands that only read schemas."""
    try:
        return mcp_definitions(mcp_servers(values, config), start_timeout_ms)
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


def codemode_config_of(
    compute_ms: int,
    wall_ms: int,
    max_output_bytes: int,
    max_heap_mb: int,
    max_parallel_sub_calls: int,
    *,
    policy: str,
    call_style: str,
    max_tool_calls: int,
    preflight_check: bool = False,
    max_model_output_bytes: int = MODEL_OUTPUT_BYTES,
) -> CodeModeConfig:
    """The code-mode settings the flags of ``run``, ``mcp`` and ``repl`` give."""
    return CodeModeConfig(
        limits=Limits(
            compute_ms=compute_ms,
            max_wall_ms=wall_ms,
            max_output_bytes=max_output_bytes,
            max_heap_mb=max_heap_mb,
            max_parallel_sub_calls=max_parallel_sub_calls,
        ),
        policy="restricted" if policy == "restricted" else "python",
        call_style="sync" if call_style == "sync" else "async",
        max_tool_calls=max_tool_calls,
        preflight_check=preflight_check,
        max_model_output_bytes=max_model_output_bytes,
    )


def unwrap_usage(exc: BaseException) -> UsageFailure | None:
    """A usage error hidden in an exception group (a task group re-raises what it caught)."""
    import sdkgen
    from host.mcp import McpError

    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = unwrap_usage(inner)
            if found is not None:
                return found
        return None
    if isinstance(exc, UsageFailure):
        return exc
    if isinstance(
        exc,
        McpUsageError | McpError | RuntimeUsageError | RuntimeEnvironmentError | sdkgen.SdkgenError,
    ):
        return UsageFailure(str(exc))
    return None
