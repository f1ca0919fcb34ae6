"""A child slot: the host's ends of one child's pipes, from the fork request to the run."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from host.sandbox._cgroup import RunCgroup
from host.sandbox._deno import CHILD_ENV
from host.sandbox._fdio import close_fd, read_some
from host.sandbox._template import TemplateProcess
from host.sandbox._workdir import remove_tree
from runtime.lowlevel import BUDGET_KINDS, Prepare, ProcStat, encode_frame, kill_tree

__all__ = ("ChildSlot", "Engine")

_INT = struct.Struct("!i")
_RECORD = 5  # b"P", b"X" or b"B", then a 4-byte int


@dataclass(frozen=True)
class Engine:
    """What a child becomes once contained: a command (on the run's pipes, fds 0 and 1), and
    the data rlimit it starts under (0: none)."""

    argv: tuple[str, ...]
    data_bytes: int = 0


class ChildSlot:
    """One child asked of the template; forked ahead of time, it waits for its program.

    The slot owns the run's private directory: made with the slot, so a child forked
    ahead of time is already in it (and confined to it) when its program arrives.
    """

    def __init__(
        self,
        template: TemplateProcess,
        fds: dict[str, int],
        workdir: str,
        cgroup: RunCgroup | None = None,
        uid: int | None = None,
        own_uid: bool = False,
        engine: Engine | None = None,
        *,
        spare: bool = False,
    ) -> None:
        self.template = template
        self.spare = spare
        """Forked ahead of time (to wait for a run), not for the run that took it."""
        self.fds = fds
        self.workdir = workdir
        self.cgroup = cgroup
        """The cgroup the child joins before it reads its program (None: no cgroups)."""
        self.uid = uid
        """The uid the child runs as (None: the template's)."""
        self.own_uid = own_uid
        """``uid`` is this run's alone: every process of that uid is the run's."""
        self.engine = engine
        """What the child becomes once contained (None: it stays Python)."""
        self.pid: int | None = None
        self.exit_status: int | None = None
        self.budget: str | None = None
        """The budget the template stopped the run at ("wall", "compute"), if it did."""
        self._pending = b""
        self._stat: ProcStat | None = None

    @classmethod
    async def fork(
        cls,
        template: TemplateProcess,
        *,
        workdir: str,
        file_bytes: int,
        open_files: int,
        warm_up: bool,
        cgroup: RunCgroup | None = None,
        uid: int | None = None,
        own_uid: bool = False,
        max_processes: int = 0,
        engine: Engine | None = None,
    ) -> ChildSlot:
        """Make the run's pipes and ask the template to fork a child on them, in ``workdir``
        (made by the caller, off the event loop; removed here on failure); does not wait.
        The child joins ``cgroup`` first, runs as ``uid`` (``own_uid``: no other run has it),
        and runs a throwaway program if ``warm_up`` (a spare, with time on its hands); it
        becomes ``engine`` once contained, if given. Raises OSError."""
        opened: list[int] = []  # every fd made here, closed on any failure
        try:
            for _ in range(5):
                opened += os.pipe2(os.O_CLOEXEC)
        except BaseException:
            for fd in opened:
                os.close(fd)
            os.rmdir(workdir)
            raise
        ctl_in_r, ctl_in_w, ctl_out_r, ctl_out_w, log_r, log_w, status_r, status_w = opened[:8]
        where_r, where_w = opened[8:]  # the child's stack dump at a budget (_where.py)
        fds = {
            "to_child": ctl_in_w,
            "from_child": ctl_out_r,
            "log": log_r,
            "status": status_r,
            "where": where_r,
        }
        for fd in fds.values():
            os.set_blocking(fd, False)
        child_ends = [ctl_in_r, ctl_out_w, log_w, status_w, where_w]
        join = cgroup.join_fds() if cgroup is not None else []
        # Waits in the pipe for the child (an empty pipe takes a frame this small whole).
        # With a cgroup holding the run, the child need not linger to keep its tree.
        prepare = Prepare(
            workdir=workdir,
            file_bytes=file_bytes,
            open_files=open_files,
            linger=cgroup is None,
            warm_up=warm_up,
            max_processes=max_processes if own_uid else 0,
            exec_argv=list(engine.argv) if engine is not None else [],
            exec_env=dict(CHILD_ENV) if engine is not None else {},
            exec_data_bytes=engine.data_bytes if engine is not None else 0,
        )
        try:
            os.write(ctl_in_w, encode_frame(prepare))
            await template.fork(child_ends + join, uid)
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            os.rmdir(workdir)
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        return cls(template, fds, workdir, cgroup, uid, own_uid, engine, spare=warm_up)

    def _parse(self, data: bytes) -> None:
        self._pending += data
        while len(self._pending) >= _RECORD:
            tag, value = self._pending[:1], _INT.unpack(self._pending[1:_RECORD])[0]
            self._pending = self._pending[_RECORD:]
            if tag == b"P":
                self.pid = value
                if self._stat is None:
                    self._stat = ProcStat(value)
            elif tag == b"X" and self.exit_status is None:
                # the first: a run's init reports its program's status before the template
                # reports the init's own
                self.exit_status = value
            elif tag == b"B" and self.budget is None:
                self.budget = BUDGET_KINDS.get(value)

    def read_records(self) -> None:
        """Take in what the template said so far (without waiting)."""
        try:
            data = os.read(self.fds["status"], 4096)
        except (BlockingIOError, KeyError):
            return
        except OSError:
            return
        if data:
            self._parse(data)

    def stale(self) -> bool:
        """True if this spare can no longer run a program (its child or template is gone)."""
        if not self.template.alive:
            return True
        try:
            data = os.read(self.fds["status"], 64)
        except BlockingIOError:
            data = None
        if data is not None:
            if not data:
                return True
            self._parse(data)
            if self.exit_status is not None:
                return True
        return self._stat is not None and self._stat.stopped()  # a program SIGSTOPped it

    async def wait_pid(self) -> int | None:
        """The child's pid, once the template has forked it; None if the template died first."""
        while self.pid is None:
            data = await read_some(self.fds["status"], _RECORD)
            if not data:
                return None
            self._parse(data)
        return self.pid

    async def wait_exit(self) -> int | None:
        """The child's exit status, once the template has reaped it and swept its orphans."""
        while self.exit_status is None:
            data = await read_some(self.fds["status"], _RECORD)
            if not data:
                return None
            self._parse(data)
        return self.exit_status

    def discard(self) -> None:
        """Kill the child (if it was forked) and close: for a spare that can no longer serve."""
        if self.pid is not None and self.exit_status is None:
            kill_tree(self.pid)  # a stopped child would never read the EOF
        self.close()

    def close(self) -> None:
        """Close the host's ends; an idle spare child sees EOF and exits."""
        for fd in self.fds.values():
            close_fd(fd)
        self.fds = {}
        if self._stat is not None:
            self._stat.close()
            self._stat = None

    def remove_workdir(self) -> None:
        """Remove the run's directory and whatever the program left in it (never following
        a link it put in the directory's place; never raising)."""
        remove_tree(self.workdir)
