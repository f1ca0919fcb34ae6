"""Helpers of the CLI tests: a real ``dsh-code`` process, through pipes or in a pseudo-terminal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pexpect
import psutil
import pyte

#: The folder holding ``host`` and ``runtime``, for subprocesses that import them.
ROOT = Path(__file__).resolve().parents[3]


def env(**extra: str) -> dict[str, str]:
    """The environment of a ``dsh-code`` subprocess: ours, with the source tree importable."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), out.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out.pop("DSH_CODE_MCP_TOKEN", None)
    out.update(extra)
    return out


def cli(*args: str) -> list[str]:
    """The command line of ``dsh-code ARGS`` (this interpreter, the source tree)."""
    return [sys.executable, "-m", "host.cli", *args]


def run(*args: str, stdin: str | None = "", timeout: float = 60, **kwargs: Any) -> Any:
    """``dsh-code ARGS`` through pipes; the completed process (text)."""
    return subprocess.run(
        cli(*args),
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=kwargs.pop("env", None) or env(),
        **kwargs,
    )


def handles(pid: int, signum: int) -> bool:
    """Whether ``pid`` catches ``signum`` (its SigCgt mask): our handlers are installed."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll ``predicate`` until true; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def descendants(pid: int) -> list[int]:
    """The pids of every process below ``pid``."""
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    """Whether every pid has exited (zombies count as gone) within ``timeout``."""

    def none_left() -> bool:
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    return False
            except psutil.NoSuchProcess:
                continue
        return True

    return wait_until(none_left, timeout)


@dataclass
class Terminal:
    """``dsh-code`` in a pseudo-terminal, its output rendered on an emulated screen."""

    process: Any
    screen: Any = field(default_factory=lambda: pyte.Screen(100, 30))
    raw: bytearray = field(default_factory=bytearray)
    checks: list[Callable[[list[str]], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stream = pyte.ByteStream(self.screen)

    @classmethod
    def start(
        cls, *args: str, cwd: Path | None = None, columns: int = 100, **extra_env: str
    ) -> Terminal:
        """Spawn ``dsh-code ARGS`` in a new pty of ``columns`` x 30."""
        process = pexpect.spawn(
            sys.executable,
            ["-m", "host.cli", *args],
            env={**env(**extra_env), "TERM": "xterm", "COLUMNS": str(columns)},
            cwd=str(cwd) if cwd else None,
            dimensions=(30, columns),
        )
        terminal = cls(process, pyte.Screen(columns, 30))
        return terminal

    def lines(self) -> list[str]:
        """The screen's non-empty lines, right-stripped."""
        return [line.rstrip() for line in self.screen.display if line.strip()]

    def pump(self, timeout: float = 0.2) -> bool:
        """Read what is there (up to ``timeout``); False at EOF. Every check sees each state."""
        try:
            chunk = self.process.read_nonblocking(65536, timeout=timeout)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        # Feed byte by byte when checks run, so no intermediate screen state is skipped.
        if self.checks:
            for i in range(len(chunk)):
                self.stream.feed(chunk[i : i + 1])
                for check in self.checks:
                    check(self.lines())
        else:
            self.stream.feed(chunk)
        self.raw += chunk
        return True

    def wait_for(self, text: str, timeout: float = 30.0) -> None:
        """Read until ``text`` is on the screen."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not on the screen:\n" + "\n".join(self.lines()))
            if not self.pump() and not any(text in line for line in self.lines()):
                raise AssertionError(f"EOF before {text!r}:\n" + "\n".join(self.lines()))

    def wait_raw(self, text: bytes, count: int = 1, timeout: float = 30.0) -> None:
        """Read until ``text`` has been written ``count`` times in all."""
        deadline = time.monotonic() + timeout
        while self.raw.count(text) < count:
            if time.monotonic() > deadline or not self.pump():
                raise AssertionError(
                    f"{text!r} not written {count} times:\n" + "\n".join(self.lines())
                )

    def finish(self, timeout: float = 30.0) -> int:
        """Read to EOF; the exit code (128 + N when killed by signal N)."""
        deadline = time.monotonic() + timeout
        while self.pump():
            if time.monotonic() > deadline:
                raise AssertionError("dsh-code did not exit:\n" + "\n".join(self.lines()))
        self.process.close()
        if self.process.signalstatus is not None:
            return 128 + int(self.process.signalstatus)
        return int(self.process.exitstatus)

    def close(self) -> None:
        """Kill it if it still runs."""
        if self.process.isalive():
            self.process.terminate(force=True)
        self.process.close(force=True)


def workdirs(pids: list[int]) -> list[Path]:
    """The run directories these processes work in (the run's child, the spare ones)."""
    found = []
    for pid in pids:
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            continue
        if cwd.name.startswith("dsh-run-"):
            found.append(cwd)
    return found


class WorkdirWatch:
    """Every run directory a process tree works in, seen until stopped (a thread polls)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: set[Path] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.01):
            self.seen.update(workdirs(descendants(self.pid)))

    def stop(self) -> list[Path]:
        """Stop watching; the directories seen."""
        self._stop.set()
        self._thread.join()
        return sorted(self.seen)


def sweep(*dirs: Path | None) -> None:
    """Remove run directories a killed ``dsh-code`` left (what the next runtime's sweep does)."""
    for workdir in dirs:
        if workdir is not None and workdir.name.startswith("dsh-run-") and workdir.exists():
            shutil.rmtree(workdir, ignore_errors=True)
