"""A fault-injecting stdio MCP server: ``faulty.py MODE`` with MODE ok, refuse, mute or garbage."""

from __future__ import annotations

import os
import sys
import time
import warnings

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
if MODE == "refuse":
    sys.stderr.write("faulty: refusing to start (missing API key)\n")
    sys.exit(3)
if MODE == "mute":
    time.sleep(3600)  # never speaks MCP
if MODE == "garbage":
    print("this is not JSON-RPC", flush=True)  # what a server printing a banner does
    print('{"jsonrpc": "2.0", "nonsense": true}', flush=True)
    time.sleep(3600)

import anyio  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("faulty", log_level="ERROR")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.tool()
def crash() -> str:
    """Kill the server process in the middle of the call."""
    sys.stderr.write("faulty: crashing now\n")
    sys.stderr.flush()
    os._exit(7)


@server.tool()
async def hang() -> str:
    """Never answer."""
    await anyio.sleep_forever()
    return "unreachable"


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    if len(sys.argv) > 2:  # faulty.py ok PIDFILE: lets a test check the server is gone after
        with open(sys.argv[2], "w") as pidfile:
            pidfile.write(str(os.getpid()))
    server.run()
