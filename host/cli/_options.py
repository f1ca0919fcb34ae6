"""The options of the ``dsh-code`` commands, defined once (defaults from ``runtime.Limits()``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

import typer

from host.codemode import MIN_MODEL_OUTPUT_BYTES, CodeModeConfig
from runtime import Limits

__all__ = (
    "DEFAULTS",
    "MAX_HEAP_MB",
    "MAX_STATE_BYTES",
    "MCP_WALL_MS",
    "MODEL_OUTPUT_BYTES",
    "BindingsOption",
    "CallStyleOption",
    "ComputeMsOption",
    "IsolationOption",
    "LangOption",
    "MaxHeapMbOption",
    "MaxModelOutputBytesOption",
    "MaxOutputBytesOption",
    "MaxParallelSubCallsOption",
    "MaxProcessesOption",
    "MaxStateBytesOption",
    "MaxToolCallsOption",
    "NoCgroupsOption",
    "PolicyOption",
    "PreloadOption",
    "RayOption",
    "SessionOption",
    "WallMsOption",
)

DEFAULTS: Final = Limits()
#: The largest heap cap the child's RLIMIT_DATA (a signed 64-bit byte count, added to the
#: child's own data size) and the cgroup's memory.max can hold: 2**42 MiB = 4 EiB.
MAX_HEAP_MB: Final = 1 << 42
#: ``dsh-code mcp``'s wall budget: below the 60 s request timeout of common MCP clients, so
#: a runaway program ends as a ``budget`` failure the model can act on, not a client timeout.
MCP_WALL_MS: Final = 50_000
#: What the model reads of a run: ``CodeModeConfig()``'s (about 20 000 tokens).
MODEL_OUTPUT_BYTES: Final = CodeModeConfig().max_model_output_bytes
#: A session's state cap: ``SubprocessRuntime.session()``'s default (64 MiB).
MAX_STATE_BYTES: Final = 64 * 1024 * 1024
_MAX_MS: Final = 1 << 40  # ~35 years: anything larger is a typo, and overflows timers
_MAX_BYTES: Final = 1 << 50

BindingsOption = Annotated[
    list[Path],
    typer.Option(
        "--bindings",
        "-b",
        metavar="FILE",
        help="A Python file whose top-level tools are bound under tools (repeatable).",
        show_default=False,
    ),
]
ComputeMsOption = Annotated[
    int,
    typer.Option(
        "--compute-ms", metavar="MS", min=1, max=_MAX_MS, help="Busy-CPU budget of a run, in ms."
    ),
]
WallMsOption = Annotated[
    int,
    typer.Option(
        "--wall-ms", metavar="MS", min=1, max=_MAX_MS, help="Wall-clock budget of a run, in ms."
    ),
]
MaxOutputBytesOption = Annotated[
    int,
    typer.Option(
        "--max-output-bytes",
        metavar="BYTES",
        min=1,
        max=_MAX_BYTES,
        help="Cap on a run's logs + result bytes.",
    ),
]
MaxModelOutputBytesOption = Annotated[
    int,
    typer.Option(
        "--max-model-output-bytes",
        metavar="BYTES",
        min=MIN_MODEL_OUTPUT_BYTES,
        max=_MAX_BYTES,
        help="What the model reads of a run; past it a head and a tail (the whole text kept "
        "as an MCP resource).",
    ),
]
MaxHeapMbOption = Annotated[
    int,
    typer.Option(
        "--max-heap-mb",
        "--memory-mb",
        metavar="MIB",
        min=1,
        max=MAX_HEAP_MB,
        help="Heap cap of a program, in MiB (--memory-mb is the old name).",
    ),
]
MaxParallelSubCallsOption = Annotated[
    int,
    typer.Option(
        "--max-parallel-sub-calls",
        metavar="N",
        min=1,
        max=1 << 20,
        help="Concurrency-safe calls at once.",
    ),
]
MaxToolCallsOption = Annotated[
    int,
    typer.Option(
        "--max-tool-calls", metavar="N", min=1, max=1 << 40, help="Tool calls one run may make."
    ),
]
LangOption = Annotated[
    str | None,
    typer.Option(
        "--lang",
        metavar="python|typescript",
        help="The programs' language (default: typescript for a .ts file, else python).",
        show_default=False,
    ),
]
PolicyOption = Annotated[
    str, typer.Option("--policy", metavar="python|restricted", help="python or restricted.")
]
IsolationOption = Annotated[
    str,
    typer.Option(
        "--isolation",
        metavar="auto|namespaces|process",
        help="auto (namespaces where the kernel allows, else process), namespaces or process.",
    ),
]
MaxProcessesOption = Annotated[
    int,
    typer.Option(
        "--max-processes",
        metavar="N",
        min=4,
        max=1 << 22,
        help="Processes + threads a run may have (needs a pids cgroup).",
    ),
]
NoCgroupsOption = Annotated[
    bool, typer.Option("--no-cgroups", help="Do not give runs cgroups of their own.")
]
CallStyleOption = Annotated[
    str,
    typer.Option(
        "--call-style",
        metavar="async|sync",
        help="How programs call tools: await tools.x(...) (async) or tools.x(...) (sync).",
    ),
]
PreloadOption = Annotated[
    list[str],
    typer.Option(
        "--preload",
        metavar="MODULE",
        help="Import MODULE once in the template, so a program's import costs nothing (repeatable).",
        show_default=False,
    ),
]
RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="ADDRESS",
        help="Run programs on the Ray cluster at ADDRESS (host:port of its head, or auto).",
        show_default=False,
    ),
]
SessionOption = Annotated[
    Path | None,
    typer.Option(
        "--session",
        metavar="FILE",
        help="Carry the program's variables: load the state from FILE, save it after a success.",
        show_default=False,
    ),
]
MaxStateBytesOption = Annotated[
    int,
    typer.Option(
        "--max-state-bytes",
        metavar="BYTES",
        min=1,
        max=_MAX_BYTES,
        help="Cap on a session's state.",
    ),
]
