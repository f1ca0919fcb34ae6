"""The host's TypeScript front end: one Deno process per runtime that turns a program into the
module its child imports, or says where it does not parse, without starting a child.

It only parses (Deno's type stripper, then V8's module parser); no program text is run in it.
It runs with no Deno permission, an empty environment, in a session of its own, as the
runs' uid on a root host, and ends when its stdin closes (the runtime closed, or the host
died). A program it takes too long over, or that makes it die, is rejected (kind ``parse``)
and the next program gets a fresh front end.
"""

from __future__ import annotations

import os
import struct
import subprocess

import anyio
import msgspec

from host.sandbox._deno import frontend_argv
from host.sandbox._fdio import close_fd, read_some, write_all
from runtime import RuntimeClosedError, RuntimeEnvironmentError
from runtime.lowlevel import ProgramRejected

__all__ = ("TypeScriptFrontEnd",)

_HEADER = struct.Struct("!I")


class _Answer(msgspec.Struct, frozen=True):
    js: str | None = None
    error: str | None = None
    line: int | None = None
    column: int | None = None


_decoder = msgspec.json.Decoder(_Answer)


def _rejection(answer: _Answer, source: str) -> ProgramRejected:
    """A syntax error in the program's own lines, shown as Python shows one."""
    message = answer.error or "SyntaxError: the program cannot be parsed"
    if not message.startswith(("SyntaxError", "TypeError")):
        message = f"SyntaxError: {message}"
    line, column = answer.line, answer.column
    if line is None:
        return ProgramRejected(message, None)
    lines = source.splitlines()
    message += f" (line {line}, column {column})"
    if 1 <= line <= len(lines) and column is not None and len(lines[line - 1]) <= 300:
        text = lines[line - 1]
        caret = " " * (max(column, 1) - 1 + 4 - (len(text) - len(text.lstrip())))
        message += f"\n    {text.strip()}\n{caret}^"
    return ProgramRejected(message, line)


class TypeScriptFrontEnd:
    """Compiles programs through one long-lived Deno process, one program at a time."""

    def __init__(self, *, run_uid: int | None = None, timeout: float = 10.0) -> None:
        self._run_uid = run_uid
        self._timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._to: int | None = None
        self._from: int | None = None
        self._lock = anyio.Lock()
        self._closed = False

    def _start(self) -> None:
        if self._closed:  # a compile that waited while the runtime closed starts nothing
            raise RuntimeClosedError("the runtime is closed; create a new one")
        try:
            proc = subprocess.Popen(
                frontend_argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={},
                cwd="/",
                start_new_session=True,
                user=self._run_uid,
                group=self._run_uid,
                extra_groups=[] if self._run_uid is not None else None,
            )
        except OSError as exc:
            raise RuntimeEnvironmentError(f"cannot start the TypeScript front end: {exc}") from exc
        assert proc.stdin is not None and proc.stdout is not None
        self._to, self._from = os.dup(proc.stdin.fileno()), os.dup(proc.stdout.fileno())
        proc.stdin.close()
        proc.stdout.close()
        os.set_blocking(self._to, False)
        os.set_blocking(self._from, False)
        self._proc = proc

    async def compile(self, source: str) -> bytes:
        """The module text the child imports (UTF-8); raises ``ProgramRejected``."""
        async with self._lock:
            if self._proc is None:
                self._start()
            assert self._to is not None and self._from is not None
            body = source.encode("utf-8", "surrogatepass")
            answer: _Answer | None = None
            # never left half done (a later program would read this one's answer): a caller
            # cancelled meanwhile sees it once the answer is in, within the timeout
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._timeout):
                try:
                    await write_all(self._to, _HEADER.pack(len(body)) + body)
                    answer = _decoder.decode(await self._read_frame(self._from))
                except (OSError, EOFError, msgspec.DecodeError):
                    answer = None
            if answer is None:
                with anyio.CancelScope(shield=True):
                    await self._stop()  # dead or stuck: the next program gets a fresh one
                raise ProgramRejected(
                    "SyntaxError: the TypeScript front end could not parse the program (it "
                    f"failed or took longer than {self._timeout:g} s over it)"
                )
        if answer.js is None:
            raise _rejection(answer, source)
        return answer.js.encode()

    def data_bytes(self) -> int:
        """Its data segment now (0 if it is not running): what a Deno process takes at start,
        as near as one can see it from here."""
        proc = self._proc
        try:
            with open(f"/proc/{proc.pid if proc else 0}/statm", "rb") as f:
                return int(f.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            return 0

    @staticmethod
    async def _read_frame(fd: int) -> bytes:
        data = b""
        while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
            chunk = await read_some(fd)
            if not chunk:
                raise EOFError
            data += chunk
        return data[_HEADER.size :]

    async def aclose(self) -> None:
        """Stop it for good: a later ``compile`` raises ``RuntimeClosedError``."""
        self._closed = True
        await self._stop()

    async def _stop(self) -> None:
        """Close its stdin (it exits), and reap it (killed if it does not go at once)."""
        proc, self._proc = self._proc, None
        for fd in (self._to, self._from):
            if fd is not None:
                close_fd(fd)
        self._to = self._from = None
        if proc is None:
            return
        with anyio.move_on_after(1.0):
            while proc.poll() is None:
                await anyio.sleep(0.005)
        if proc.poll() is None:
            proc.kill()
            await anyio.to_thread.run_sync(proc.wait)
