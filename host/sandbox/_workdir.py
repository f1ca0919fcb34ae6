"""Runs' private directories: made with a name that says whose they are, removed whatever
a program left in them, and swept when the runtime that made them died without cleaning up."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import stat
import struct
import tempfile

__all__ = ("make_workdir", "remove_tree", "runtime_tag", "sweep_stale")

_PREFIX = "dsh-run-"
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602
_FS_IMMUTABLE_FL, _FS_APPEND_FL = 0x10, 0x20


@functools.cache
def _pid_namespace() -> str:
    """This process's PID namespace (once: it is the process's for life)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def runtime_tag(pid: int | None = None) -> str:
    """``<pid namespace>-<pid>``: whose a directory is (a pid means nothing in another
    PID namespace, and containers may share /dev/shm)."""
    return f"{_pid_namespace()}-{os.getpid() if pid is None else pid}"


def make_workdir(root: str, uid: int | None = None) -> str:
    """A new private directory under ``root`` for one run, named after its runtime (owned
    by ``uid``, mode 0700, when the run has a uid of its own)."""
    path = tempfile.mkdtemp(prefix=f"{_PREFIX}{runtime_tag()}-", dir=root)
    if uid is not None:
        try:
            os.chown(path, uid, uid)
        except OSError:
            os.rmdir(path)
            raise
    return path


def _clear_flags(fd: int) -> None:
    """Take the immutable and append-only flags off the file ``fd`` (a root host may)."""
    buf = bytearray(8)
    try:
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf)
        flags = struct.unpack("=q", buf)[0]
        if flags & (_FS_IMMUTABLE_FL | _FS_APPEND_FL):
            fcntl.ioctl(
                fd, _FS_IOC_SETFLAGS, struct.pack("=q", flags & ~(_FS_IMMUTABLE_FL | _FS_APPEND_FL))
            )
    except OSError:
        pass


def _unflag(parent: int, name: str) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
    except OSError:
        return
    try:
        _clear_flags(fd)
    finally:
        os.close(fd)


def _unlink(parent: int, name: str, is_dir: bool) -> None:
    try:
        if is_dir:
            os.rmdir(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except PermissionError:
        _unflag(parent, name)
        with contextlib.suppress(OSError):
            if is_dir:
                os.rmdir(name, dir_fd=parent)
            else:
                os.unlink(name, dir_fd=parent)


def _next_subdir(fd: int, tried: set[str]) -> str | None:
    """Remove every non-directory in ``fd``; the name of a subdirectory not yet tried."""
    found = None
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if not is_dir:
                _unlink(fd, entry.name, False)
            elif found is None and entry.name not in tried:
                found = entry.name
    return found


def remove_tree(path: str) -> bool:
    """Remove ``path`` and everything under it; True if it is gone.

    Iterative (any depth), relative to directory fds (a link the program left is removed,
    never followed), and it clears immutable and append-only flags on the way. Never raises.
    """
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)  # a link or a file put in the directory's place
        return not os.path.lexists(path)
    _clear_flags(top)
    # each level: its fd, its name in the level above, the subdirectories tried already
    stack: list[tuple[int, str, set[str]]] = [(top, "", set())]
    try:
        while stack:
            fd, _name, tried = stack[-1]
            name = _next_subdir(fd, tried)
            if name is not None:
                tried.add(name)
                try:
                    sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    _unlink(fd, name, True)
                    continue
                _clear_flags(sub)
                stack.append((sub, name, set()))
                continue
            _, own_name, _ = stack.pop()
            os.close(fd)
            if stack:
                _unlink(stack[-1][0], own_name, True)
    finally:
        for fd, _, _ in stack:
            with contextlib.suppress(OSError):
                os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(path)
    return not os.path.lexists(path)


def _owner_alive(name: str) -> bool:
    """Whether the runtime that made directory ``name`` may still be alive."""
    parts = name[len(_PREFIX) :].split("-")
    if len(parts) < 3 or not parts[1].isdigit():
        return True  # not one of ours, or an old-style name: leave it
    if parts[0] != _pid_namespace():
        return True  # another PID namespace: its pids mean nothing here
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep_stale(root: str) -> int:
    """Remove the run directories under ``root`` whose runtime is gone; how many."""
    removed = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(_PREFIX) or _owner_alive(name):
            continue
        path = os.path.join(root, name)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                continue
        except OSError:
            continue
        removed += remove_tree(path)
    return removed
