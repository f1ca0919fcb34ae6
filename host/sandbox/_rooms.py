"""Each child's room: its cgroup, its uid and its private directory, made and freed by one
worker thread of the runtime (file system work never runs on the event loop), a few made
ahead of time so a fork waits for no thread."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from host.sandbox._cgroup import CgroupSet, RunCgroup
from host.sandbox._options import RunOptions
from host.sandbox._slot import ChildSlot
from host.sandbox._uids import UidPool
from host.sandbox._workdir import make_workdir, remove_tree, sweep_stale
from runtime import Limits, RuntimeEnvironmentError
from runtime.lowlevel import searchable_by

__all__ = ("ROOMS_AHEAD", "Room", "Rooms")

T = TypeVar("T")
#: Rooms made ahead of time.
ROOMS_AHEAD = 2
#: A child's cgroup (None: runs go without), private directory, and uid (None: the template's).
Room = tuple[RunCgroup | None, str, int | None]

_log = logging.getLogger("host.sandbox")


class Rooms:
    """The rooms of a runtime's children: ``stock`` made ahead, ``make`` and ``free`` for its
    worker thread (``in_worker``)."""

    def __init__(self, options: RunOptions, uids: UidPool | None, fixed_uid: int | None) -> None:
        self.options = options
        self.uids = uids
        self.fixed_uid = fixed_uid
        """Every run's uid when they share one (None: a pool's, or the template's own)."""
        self.cgroups: CgroupSet | None = None
        """Set once the runtime has made them (None: runs go without cgroups)."""
        self.heap_bytes = Limits().max_heap_mb * 1024 * 1024
        """The last run's heap cap: a room's cgroup is capped so ahead of time."""
        self.stock: list[Room] = []
        self.filling = False
        self._limiter: anyio.CapacityLimiter | None = None

    async def open(self) -> None:
        """Once per runtime: lock the uids, check that they may reach the working directories'
        root, and sweep what dead runtimes left there. Raises ``RuntimeEnvironmentError``."""
        root = self.options.workdir_root
        uid = self.fixed_uid
        if self.uids is not None:
            await self.in_worker(self.uids.open)
            uid = self.uids.uids[0]
        if uid is not None and not await self.in_worker(searchable_by, root, uid, uid):
            raise RuntimeEnvironmentError(
                f"workdir_root {root} is not searchable by uid {uid}, a uid programs run as on "
                "this root host: make every directory on the way searchable by others (chmod "
                "o+x), choose another workdir_root, or pass run_as_uid=0"
            )
        removed = await self.in_worker(sweep_stale, root)
        if removed:
            _log.info("dsh-code: removed %d run directories left by dead runtimes", removed)

    async def open_cgroups(self, max_processes: int) -> str:
        """Make the runtime's cgroups where the host lets it; why runs go without ("": they
        do not). Off the event loop: the first time, a probe process has to start."""
        self.cgroups, why_not = await anyio.to_thread.run_sync(CgroupSet.create, max_processes)
        if self.cgroups is None:
            _log.info("dsh-code: runs go without cgroups: %s", why_not)
        return why_not

    def run_uids(self) -> list[int]:
        """The uids the template may be asked to run children as (empty: its own)."""
        if self.uids is not None:
            return self.uids.uids
        return [self.fixed_uid] if self.fixed_uid is not None else []

    async def in_worker(self, work: Callable[..., T], *args: Any) -> T:
        """Run file system work off the event loop, one piece at a time: in one worker
        thread however many runs overlap (a runtime adds no threads as it goes)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(work, *args, limiter=self._limiter)

    def make(self) -> Room:
        """A child's cgroup (its memory capped as the last run's, so a run like it writes
        nothing), uid and private directory (that uid's); for the worker thread."""
        cgroup = None
        if self.cgroups is not None:
            try:
                cgroup = self.cgroups.new_run()
            except OSError as exc:
                _log.warning("dsh-code: a run goes without cgroups: %s", exc)
            else:
                with contextlib.suppress(OSError):  # the run tries again, and says so
                    cgroup.limit_memory(self.heap_bytes)
        uid = self.uids.take() if self.uids is not None else self.fixed_uid
        try:
            return cgroup, make_workdir(self.options.workdir_root, uid), uid
        except BaseException:
            self.give_back(cgroup, uid)
            raise

    def give_back(self, cgroup: RunCgroup | None, uid: int | None) -> None:
        """A room's cgroup and uid may serve another child (its processes are gone)."""
        if cgroup is not None and self.cgroups is not None:
            self.cgroups.release(cgroup)
        if uid is not None and self.uids is not None:
            self.uids.give(uid)

    def free(self, slot: ChildSlot) -> None:
        """Remove a child's directory, give its cgroup and uid back; for the worker thread."""
        slot.remove_workdir()
        self.release(slot)

    def release(self, slot: ChildSlot) -> None:
        """A child's processes are gone (or killed): its cgroup and uid may serve another."""
        self.give_back(slot.cgroup, slot.uid if slot.own_uid else None)
        slot.cgroup, slot.own_uid = None, False

    def close(self, spares: list[ChildSlot]) -> None:
        """Free the spares' rooms and the stock, remove the cgroups, let the uids go; for the
        worker thread, once every child has exited."""
        for spare in spares:
            self.free(spare)
        for cgroup, workdir, uid in self.stock:
            remove_tree(workdir)
            self.give_back(cgroup, uid)
        self.stock = []
        if self.cgroups is not None:
            self.cgroups.close()
            self.cgroups = None
        if self.uids is not None:
            self.uids.close()
