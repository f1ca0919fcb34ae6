"""Call ``dsh-code mcp --http PORT``'s ``run_code`` with the SDK's client, over streamable HTTP.

``python examples/mcp/http_client.py [URL] [PROGRAM]``: waits (up to 30 s) until the server
listens, sends the bearer token from ``DSH_CODE_MCP_TOKEN``, prints the run's text.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = "http://127.0.0.1:8765/mcp"
PROGRAM = "return await tools.list_dir(path='.')"


def wait_for(url: str, timeout: float = 30.0) -> None:
    """Return once something listens at the URL's host and port (the server has started)."""
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((parts.hostname, parts.port or 80), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing listens at {url} after {timeout:g} s") from None
            time.sleep(0.1)


async def main(url: str, program: str) -> None:
    """Run one program through ``run_code`` and print its text."""
    token = os.environ.get("DSH_CODE_MCP_TOKEN", "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool("run_code", {"code": program})
        print(result.content[0].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else URL
    wait_for(target)
    anyio.run(main, target, sys.argv[2] if len(sys.argv) > 2 else PROGRAM)
