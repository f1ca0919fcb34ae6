"""``dsh-code mcp``'s event loop: serve until the client leaves or a signal stops it."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from host.cli._mcp import MCP_START_TIMEOUT_MS, open_mcp
from host.cli._output import result_stream
from host.cli._setup import RuntimeOptions, make_registry
from host.cli._signals import Stopper, signal_name
from host.codemode import CodeModeConfig

if TYPE_CHECKING:
    from host.cli._bindings import Bindings
    from host.mcp import McpServerSpec
    from host.tools import ToolRegistry
    from runtime import CodeRuntime

__all__ = ("ServePlan", "serve_mcp")


@dataclass(frozen=True)
class ServePlan:
    """Everything ``dsh-code mcp`` decided before the event loop starts."""

    bindings: Bindings
    servers: list[McpServerSpec]
    mcp_timeout_ms: int
    config: CodeModeConfig
    yes: bool
    http_port: int | None
    token: str | None
    token_generated: bool
    runtime: RuntimeOptions
    max_state_bytes: int
    mcp_start_timeout_ms: int = MCP_START_TIMEOUT_MS


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"dsh-code mcp: {text}\n")
        sys.stderr.flush()


def _stdio_fds() -> tuple[int, int] | None:
    """Private copies of stdin and of the claimed stdout; fd 0 then reads /dev/null."""
    try:
        write = result_stream().fileno()
        read = os.dup(0)
    except (OSError, ValueError, io.UnsupportedOperation):
        return None  # not a real process's stdio (a test runner): the SDK's own streams
    os.set_inheritable(read, False)
    os.set_inheritable(read, False)
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # a tool reading stdin must not steal the client's messages
        os.close(null)
    return read, write


def _announce(plan: ServePlan, tools: str) -> Callable[[str], None]:
    def ready(where: str) -> None:
        if where == "stdio":
            _say(
                f"serving run_code over {tools} on stdio (MCP on stdin/stdout); "
                "stop: Ctrl-C, or close stdin"
            )
        elif plan.token_generated:
            _say(f"serving on {where} (bearer token: {plan.token}); stop: Ctrl-C")
        elif plan.token is not None:
            _say(f"serving on {where} (bearer token as given); stop: Ctrl-C")
        else:
            _say(f"serving on {where} (no auth); stop: Ctrl-C")

    return ready


async def _serve(plan: ServePlan, registry: ToolRegistry, runtime: CodeRuntime) -> None:
    from host.codemode import CodeMode
    from host.mcp import McpServeConfig, serve

    codemode = CodeMode(registry, runtime, plan.config)
    count = len(registry.manifest())
    ready = _announce(plan, f"{count} tool{'s' if count != 1 else ''}")
    config = McpServeConfig(
        http_port=plan.http_port, token=plan.token, max_state_bytes=plan.max_state_bytes
    )
    fds = _stdio_fds() if plan.http_port is None else None
    try:
        await serve(codemode, config, on_ready=ready, stdio_fds=fds)
    finally:
        if fds is not None:
            os.close(fds[0])


async def serve_mcp(plan: ServePlan, stopper: Stopper) -> None:
    """Start the MCP servers and the runtime, announce, serve; a signal stops it all."""
    stopped: list[int] = []
    starting = [False]

    async def ask(_call: object, _decision: object) -> bool:
        return plan.yes

    with anyio.CancelScope() as everything:

        def on_signal(signum: int) -> None:
            stopped.append(signum)
            _say(f"{signal_name(signum)}: stopping (runs aborted, servers stopped)")
            if not starting[0]:  # a template cancelled while it starts prints a traceback
                everything.cancel()

        async with stopper.watch(on_signal):
            with contextlib.redirect_stdout(sys.stderr):  # setup_registry hooks may print
                registry = make_registry(plan.bindings, ask)
            if not plan.yes:  # an `ask` goes to the MCP client, by elicitation
                from host.mcp import elicitation_ask_handler

                registry.ask_handler = elicitation_ask_handler()
            async with open_mcp(
                plan.servers, registry, plan.mcp_timeout_ms, plan.mcp_start_timeout_ms
            ):
                starting[0] = True
                async with plan.runtime.runtime() as runtime:
                    starting[0] = False
                    if not stopped:
                        await _serve(plan, registry, runtime)
