"""What Linux gives cheaply, from inside the child: Landlock, namespaces, a private /proc.

Every function here is best effort where the kernel says no, and reports what it did,
so the runtime can say which isolation a run actually had.
"""

from __future__ import annotations

import ctypes
import os
import struct

__all__ = (
    "enter_namespaces",
    "landlock",
    "landlock_abi",
    "mount_proc",
    "mount_workdir",
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]

# Landlock (linux/landlock.h); the syscall numbers are the same on every architecture.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_FS_WRITE_FILE = 1 << 1
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_CLONE_NEWPID, _CLONE_NEWNET, _CLONE_NEWCGROUP = 0x20000000, 0x40000000, 0x02000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18


def _error(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    version = _libc.syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def landlock(writable_dir: str) -> int:
    """Confine this process (and what it starts): writes only beneath ``writable_dir``.

    From ABI 6 also: no signals and no abstract unix sockets outside the domain. Landlock
    itself keeps ptrace and /proc/<pid>/environ of processes outside the domain out of
    reach. Returns the ABI used (0: nothing applied). Needs no_new_privs set first.
    """
    abi = landlock_abi()
    if abi < 1:
        return 0
    handled = _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    file_rights = _FS_WRITE_FILE
    if abi >= 2:
        handled |= _FS_REFER
    if abi >= 3:
        handled |= _FS_TRUNCATE
        file_rights |= _FS_TRUNCATE
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled, 0, scoped) if abi >= 6 else struct.pack("=Q", handled)
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        raise _error("landlock_create_ruleset")
    try:
        for path, rights in ((writable_dir, handled), (os.devnull, file_rights)):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", rights, fd)
                if _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0) < 0:
                    raise _error(f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if _libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) < 0:
            raise _error("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def enter_namespaces() -> None:
    """Enter new user, PID, network, mount, IPC and cgroup namespaces, keeping our uid
    (mapped 1:1). The cgroup namespace roots at the run's cgroup, so the host's cgroup
    paths do not show.

    Mapping our own uid needs no privilege, and it keeps the interpreter (which may live
    in a directory only its owner can read) importable. The capabilities root has inside
    hold only inside. The caller forks next: its child is PID 1 of the new PID namespace.
    """
    uid, gid = os.geteuid(), os.getegid()
    flags = (
        _CLONE_NEWUSER
        | _CLONE_NEWPID
        | _CLONE_NEWNET
        | _CLONE_NEWNS
        | _CLONE_NEWIPC
        | _CLONE_NEWCGROUP
    )
    if _libc.unshare(flags) != 0:
        raise _error("unshare")
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def mount_proc() -> None:
    """In the new mount namespace: nothing propagates out; /proc shows our PID namespace only."""
    if _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise _error("mount --make-rprivate /")
    if _libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
        raise _error("mount proc")


def mount_workdir(workdir: str, size_bytes: int) -> None:
    """Cover ``workdir`` with a fresh tmpfs of ``size_bytes``: no other run (nor the host) sees in."""
    options = f"size={size_bytes},mode=0700".encode()
    if _libc.mount(b"tmpfs", workdir.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
        raise _error("mount tmpfs")
