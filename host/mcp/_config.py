"""How ``dsh-code mcp`` serves: the settings of the MCP server (no MCP import here)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("McpServeConfig",)


@dataclass(frozen=True)
class McpServeConfig:
    """How ``dsh-code mcp`` serves: its name, and streamable HTTP on ``host:http_port``."""

    name: str = "dsh-code"
    http_port: int | None = None
    host: str = "127.0.0.1"
    path: str = "/mcp"
    log_level: str = "info"
    """The level of the log notifications that carry a program's output lines."""
    log_pending_chars: int = 1 << 20
    """Log characters waiting to be sent to a client; past it lines are dropped and counted."""
    log_batch_chars: int = 64 * 1024
    """The most characters one log notification carries (longer lines are cut)."""
    progress_interval_s: float = 1.0
    """Seconds between progress notifications of a run (for a client that sent a token)."""
    token: str | None = None
    """The bearer token HTTP clients must send (``Authorization: Bearer ...``); None: none."""
    sessions: bool = True
    """One code-mode session per client, its variables kept between ``run_code`` calls (where
    the runtime offers sessions); False: every ``run_code`` starts empty."""
    max_state_bytes: int = 64 * 1024 * 1024
    """The cap on each session's state (a run past it fails with kind ``state``)."""
    max_sessions: int = 64
    """HTTP: client sessions kept at once; past it the least recently used is dropped."""
    session_idle_s: float = 3600.0
    """HTTP: a client session unused for this long is dropped."""
    header_timeout_s: float = 5.0
    """HTTP: how long a new connection may take to send its first request's headers."""
    request_timeout_s: float = 30.0
    """HTTP: how long a connection may take to send a request's headers and body."""
    keep_alive_s: int = 5
    """HTTP: how long an idle keep-alive connection is kept."""
    max_connections: int = 64
    """HTTP: connections that sent the token, at once; past it the least recently used idle
    one is closed, and a request finding every one busy gets 503."""
    max_pending_connections: int = 256
    """HTTP: connections that have not (yet) sent the token; past it the oldest is closed."""
    shutdown_timeout_s: float = 3.0
    """HTTP: how long open connections may take to finish when the server stops."""
    max_kept_outputs: int = 32
    """Whole texts of runs the model read cut, kept as resources (the oldest go first)."""
    max_kept_output_bytes: int = 64 * 1024 * 1024
    """The most bytes those texts take together (a larger text is not kept)."""
