"""Streamable HTTP for ``dsh-code mcp --http``: a bearer token, and bounded connections.

The SDK's app keeps its Host/Origin checks (DNS rebinding) and request body limit. On top:
every request must carry ``Authorization: Bearer <token>`` when a token is set (401
otherwise), a connection must send a whole request within ``request_timeout_s`` (one that
never finishes its headers is closed), idle keep-alive connections are closed after
``keep_alive_s``, and at most ``max_connections`` are served at once.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import anyio

from ._exceptions import McpServerError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from ._config import McpServeConfig

__all__ = ("BearerAuth", "serve_http")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class BearerAuth:
    """An ASGI wrapper: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: App, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = b""
            for name, value in scope.get("headers", ()):
                if name.lower() == b"authorization":
                    given = value
                    break
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": "missing or wrong bearer token (Authorization: Bearer ...)"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer realm="dsh-code"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _bounded_protocol(request_timeout_s: float) -> type[Any]:
    """uvicorn's h11 protocol with a deadline on receiving each whole request."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        _request_timer: Any = None

        def _arm(self) -> None:
            if self._request_timer is None:
                self._request_timer = self.loop.call_later(request_timeout_s, self._too_slow)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _too_slow(self) -> None:
            self._request_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE and self.conn.their_state is not (
                h11.SEND_BODY
            ):
                self._disarm()  # the whole request is in: the response may take its time

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

    return BoundedH11Protocol


def _bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``; ``McpServerError`` saying why not, in one line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise McpServerError(f"cannot serve on {host}:{port}: {why}") from None
    return sock


async def serve_http(
    server: Server[Any], config: McpServeConfig, on_ready: Callable[[str], None] | None
) -> None:
    """Serve until cancelled; ``on_ready(url)`` once listening; ``McpServerError`` if it cannot."""

    sock = _bound_socket(config.host, config.http_port or 0)
    with sock:
        await _serve_on(sock, server, config, on_ready)


async def _serve_on(
    sock: socket.socket,
    server: Server[Any],
    config: McpServeConfig,
    on_ready: Callable[[str], None] | None,
) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(streamable_http_path=config.path, host=config.host)
    if config.token is not None:
        app = BearerAuth(app, config.token)
    uv = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.http_port or 0,
            log_level="warning",
            lifespan="on",
            http=_bounded_protocol(config.request_timeout_s),
            timeout_keep_alive=config.keep_alive_s,
            limit_concurrency=config.max_connections,
            timeout_graceful_shutdown=max(int(config.shutdown_timeout_s), 1),
        )
    )
    uv.capture_signals = contextlib.nullcontext  # type: ignore[method-assign, assignment]  # ours stop it

    async def announce() -> None:
        while not uv.started:
            await anyio.sleep(0.02)
        if on_ready is not None:
            on_ready(f"http://{config.host}:{sock.getsockname()[1]}{config.path}")

    failed = [False]
    done = anyio.Event()

    async def run() -> None:
        try:
            with anyio.CancelScope(shield=True):  # stopped by should_exit: a graceful shutdown
                await uv.serve(sockets=[sock])
        except SystemExit:  # uvicorn exits when its start fails (the lifespan)
            failed[0] = True
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        group.start_soon(announce)
        try:
            await done.wait()
        finally:
            uv.should_exit = True
            with anyio.move_on_after(config.shutdown_timeout_s + 1, shield=True):
                await done.wait()
            uv.force_exit = True
            group.cancel_scope.cancel()
    if failed[0]:
        raise McpServerError(f"cannot serve on {config.host}:{sock.getsockname()[1]}")
