"""The session log: one JSON object per line (zstd-compressed when the name ends in .zst)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO, Any

import msgspec

__all__ = ("SessionLog",)

_encoder = msgspec.json.Encoder()


def _default(value: Any) -> Any:
    return repr(value)


class SessionLog:
    """Appends events ``{"event", "time", ...}``; enough to reconstruct a run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        raw: IO[bytes] = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._raw = raw
        self._out: Any = raw
        if path.name.endswith(".zst"):
            import zstandard

            self._out = zstandard.ZstdCompressor().stream_writer(raw, closefd=False)

    def write(self, event: str, **fields: Any) -> None:
        """Append one event."""
        record = {"event": event, "time": round(time.time(), 6), **fields}
        line = msgspec.json.Encoder(enc_hook=_default).encode(record)
        self._out.write(line + b"\n")

    def close(self) -> None:
        """Flush and close (ends the zstd frame)."""
        if self._out is not self._raw:
            self._out.close()
        self._raw.close()
