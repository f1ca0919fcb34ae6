"""Streamable HTTP for ``dsh-code mcp --http``: a bearer token, and connections no one hoards.

The SDK's app keeps its Host/Origin checks (DNS rebinding) and request body limit. In front
of it each connection is *pending* until one of its requests carries the token
(``Authorization: Bearer <token>``; with no token set, until its first request) and
*admitted* from then on, and what a client without the token can hold is bounded apart
from what admitted clients need:

- a request without the token is answered 401, and its connection closed;
- a connection must send its first request's headers within ``header_timeout_s``, and
  every request whole within ``request_timeout_s``, or it is closed;
- at most ``max_pending_connections`` are pending: a new one closes the oldest, and the
  server accepts at most half that many in one go, so a connection just made lives to
  send its request;
- at most ``max_connections`` are admitted: past it the least recently used idle one is
  closed; only when every one is busy does a request get 503.

Idle keep-alive connections are closed after ``keep_alive_s``.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Final

import anyio

from ._exceptions import McpServerError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from ._config import McpServeConfig

__all__ = ("Admission", "serve_http")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_UNAUTHORIZED: Final = b'{"error": "missing or wrong bearer token (Authorization: Bearer ...)"}'
_BUSY: Final = b'{"error": "every connection of the server is busy; retry"}'


async def _refuse(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    """Answer ``status`` with a JSON ``body``, and close the connection."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Admission:
    """The connections a server holds: pending ones (no authorized request yet) and
    admitted ones, each set bounded on its own. A connection has ``idle`` and ``drop()``."""

    def __init__(self, token: str | None, max_pending: int, max_admitted: int) -> None:
        self._expected = None if token is None else f"Bearer {token}".encode()
        self.max_pending = max_pending
        self.max_admitted = max_admitted
        self.pending: dict[Any, None] = {}
        """Oldest first."""
        self.admitted: dict[Any, None] = {}
        """Least recently used first."""

    def authorized(self, scope: Scope) -> bool:
        """Whether the request carries the token (always, with none set)."""
        if self._expected is None:
            return True
        given = b""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                given = value
                break
        return hmac.compare_digest(given, self._expected)

    def opened(self, connection: Any) -> None:
        """A new connection: pending, the oldest pending one closed to make room."""
        while len(self.pending) >= self.max_pending:
            oldest = next(iter(self.pending))
            del self.pending[oldest]
            oldest.drop()
        self.pending[connection] = None

    def closed(self, connection: Any) -> None:
        """A connection is gone."""
        self.pending.pop(connection, None)
        self.admitted.pop(connection, None)

    def admit(self, connection: Any) -> bool:
        """An authorized request on ``connection``: whether it is served (False: every
        admitted connection is busy)."""
        if connection in self.admitted:
            del self.admitted[connection]  # back in, as the most recently used
        elif len(self.admitted) >= self.max_admitted:
            idle = next((held for held in self.admitted if held.idle), None)
            if idle is None:
                return False
            del self.admitted[idle]
            idle.drop()
        self.pending.pop(connection, None)
        self.admitted[connection] = None
        return True


def _guarded_protocol(config: McpServeConfig, admission: Admission) -> type[Any]:
    """uvicorn's h11 protocol behind the admission, with deadlines on receiving requests."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _headers_timer: Any = None
        _request_timer: Any = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            inner = self.app

            async def gate(scope: Scope, receive: Receive, send: Send) -> None:
                if scope["type"] == "http":
                    if not admission.authorized(scope):
                        challenge = (b"www-authenticate", b'Bearer realm="dsh-code"')
                        await _refuse(send, 401, _UNAUTHORIZED, challenge)
                        return
                    if not admission.admit(self):
                        await _refuse(send, 503, _BUSY, (b"retry-after", b"1"))
                        return
                await inner(scope, receive, send)

            self.app = gate

        @property
        def idle(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def drop(self) -> None:
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()

        def _arm(self) -> None:
            if self._request_timer is None:
                self._request_timer = self.loop.call_later(config.request_timeout_s, self.drop)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _headers_in(self) -> None:
            if self._headers_timer is not None:
                self._headers_timer.cancel()
                self._headers_timer = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            admission.opened(self)
            self._headers_timer = self.loop.call_later(config.header_timeout_s, self.drop)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            admission.closed(self)
            self._headers_in()
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._headers_in()
                if self.conn.their_state is not h11.SEND_BODY:
                    self._disarm()  # the whole request is in: the response may take its time

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

    return GuardedH11Protocol


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
    admission = Admission(config.token, config.max_pending_connections, config.max_connections)
    uv = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.http_port or 0,
            log_level="error",  # not a line per malformed request a flood sends
            lifespan="on",
            http=_guarded_protocol(config, admission),
            timeout_keep_alive=config.keep_alive_s,
            backlog=max(config.max_pending_connections // 2, 1),  # accepted in one go
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
