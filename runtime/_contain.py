"""What Linux gives cheaply, from inside the child: Landlock, namespaces, mounts.

Every function here says what it did or raises ``OSError``; the callers decide what is best
effort, so the runtime can say which isolation a run actually had.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import sys

__all__ = (
    "enter_namespaces",
    "hide_cgroups",
    "interpreter_paths",
    "keep_writable",
    "landlock",
    "landlock_abi",
    "make_mounts_private",
    "make_root_read_only",
    "mount_proc",
    "mount_workdir",
    "reveal_paths",
    "searchable_by",
    "unshare_mounts_and_ipc",
    "unshare_network",
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
# The new mount API (the same numbers on every architecture too).
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_FS_WRITE_FILE = 1 << 1
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_CLONE_NEWPID, _CLONE_NEWNET, _CLONE_NEWCGROUP = 0x20000000, 0x40000000, 0x02000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 1 << 14, 1 << 18
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, os.O_CLOEXEC
_MOVE_MOUNT_F_EMPTY_PATH = 4
_MOUNT_ATTR_RDONLY = 1


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
    """Enter new user, PID, network, mount, IPC and cgroup namespaces, keeping our ids
    (mapped 1:1: on a root host the caller became an unprivileged uid first, so the
    program's ids are that uid's on the host). The cgroup namespace roots at the run's
    cgroup, so the host's cgroup paths do not show.

    The capabilities we have inside hold only inside. The caller forks next: its child is
    PID 1 of the new PID namespace.
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


def unshare_network() -> None:
    """A network namespace of our own: no interface but a loopback that is down."""
    if _libc.unshare(_CLONE_NEWNET) != 0:
        raise _error("unshare(CLONE_NEWNET)")


def unshare_mounts_and_ipc() -> None:
    """A mount and an IPC namespace of our own (needs CAP_SYS_ADMIN: a root host)."""
    if _libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC) != 0:
        raise _error("unshare")
    make_mounts_private()


def make_mounts_private() -> None:
    """In our mount namespace: nothing we mount propagates out."""
    if _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise _error("mount --make-rprivate /")


def make_root_read_only() -> None:
    """In our mount namespace: every mount is read-only (new ones may be mounted on top),
    but /proc itself, where a process writes its own settings (``uid_map``, ...)."""
    attr = struct.pack("=QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0)
    if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, attr, len(attr)) != 0:
        raise _error("mount_setattr / read-only")
    writable = struct.pack("=QQQQ", 0, _MOUNT_ATTR_RDONLY, 0, 0)
    if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/proc", 0, writable, len(writable)) != 0:
        raise _error("mount_setattr /proc read-write")


def hide_cgroups(path: str = "/sys/fs/cgroup") -> None:
    """Cover the host's cgroup tree with an empty read-only tmpfs (if it is there)."""
    if not os.path.isdir(path):
        return
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, b"size=4k,mode=0555") != 0:
        raise _error(f"mount tmpfs on {path}")


def mount_proc(*, hide_others: bool = False) -> None:
    """A new /proc for our PID namespace; ``hide_others``: each uid sees only its own
    processes in it (``hidepid=invisible``; root sees all)."""
    options = b"hidepid=invisible" if hide_others else None
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc.mount(b"proc", b"/proc", b"proc", flags, options) != 0:
        raise _error("mount proc")


def keep_writable(path: str) -> None:
    """In our read-only mount namespace: ``path`` (and what is below it) writable again,
    as a bind mount of itself."""
    if _libc.mount(path.encode(), path.encode(), None, _MS_BIND, None) != 0:
        raise _error(f"bind mount {path}")
    writable = struct.pack("=QQQQ", 0, _MOUNT_ATTR_RDONLY, 0, 0)
    if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), 0, writable, len(writable)):
        raise _error(f"mount_setattr {path} read-write")


def mount_workdir(workdir: str, size_bytes: int, uid: int, gid: int) -> None:
    """Cover ``workdir`` with a fresh tmpfs of ``size_bytes`` owned by ``uid``/``gid``: no
    other run (nor the host) sees in, and it goes with the mount namespace."""
    options = f"size={size_bytes},mode=0700,uid={uid},gid={gid}".encode()
    if _libc.mount(b"tmpfs", workdir.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
        raise _error("mount tmpfs")


def _searchable(path: str, uid: int, gid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return True  # not there: nothing to reveal
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def searchable_by(path: str, uid: int, gid: int) -> bool:
    """True if ``uid`` (in group ``gid``) may search every directory down to ``path``."""
    current = "/"
    for part in [p for p in os.path.realpath(path).split("/") if p]:
        current = os.path.join(current, part)
        if not _searchable(current, uid, gid):
            return False
    return _searchable("/", uid, gid)


def _blockers(paths: list[str], uid: int, gid: int) -> dict[str, set[str]]:
    """Directories ``uid`` cannot search on the way to ``paths``, with the entries needed."""
    found: dict[str, set[str]] = {}
    for path in paths:
        parts = os.path.realpath(path).strip("/").split("/")
        current = "/"
        for part in parts:
            if not part:
                break
            if not _searchable(current, uid, gid):
                found.setdefault(current, set()).add(part)
                break
            current = os.path.join(current, part)
    return found


def reveal_paths(paths: list[str], uid: int, gid: int) -> list[str]:
    """Make ``paths`` reachable for ``uid`` without widening a permission on disk: cover each
    directory on the way that ``uid`` cannot search with a read-only tmpfs that shows only
    the entries needed, each the original subtree bind-mounted back. Returns what was covered.

    For a host whose interpreter lives in a directory only root can enter (``/root``): the
    program then imports the standard library as ``uid``, and sees nothing else there.
    """
    covered: list[str] = []
    for _ in range(8):  # a revealed subtree may hold a directory closed to uid in turn
        blockers = _blockers(paths, uid, gid)
        if not blockers:
            return covered
        for directory in sorted(blockers, key=len):
            trees = {}
            for entry in sorted(blockers[directory]):
                source = os.path.join(directory, entry).encode()
                flags = _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE
                fd = _libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, source, flags)
                if fd < 0:
                    raise _error(f"open_tree {directory}/{entry}")
                trees[entry] = (int(fd), os.path.isdir(source))
            try:
                options = b"size=64k,mode=0755"
                if _libc.mount(b"tmpfs", directory.encode(), b"tmpfs", _MS_NOSUID, options) != 0:
                    raise _error(f"mount tmpfs on {directory}")
                for entry, (fd, is_dir) in trees.items():
                    target = os.path.join(directory, entry)
                    if is_dir:
                        os.mkdir(target, 0o755)
                    else:
                        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
                    moved = _libc.syscall(
                        _SYS_MOVE_MOUNT,
                        fd,
                        b"",
                        _AT_FDCWD,
                        target.encode(),
                        _MOVE_MOUNT_F_EMPTY_PATH,
                    )
                    if moved != 0:
                        raise _error(f"move_mount onto {target}")
                flags = _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID
                if _libc.mount(None, directory.encode(), None, flags, None) != 0:
                    raise _error(f"remount {directory} read-only")
            finally:
                for fd, _ in trees.values():
                    os.close(fd)
            covered.append(directory)
    return covered


def interpreter_paths() -> list[str]:
    """The directories a program's imports and ``sys.executable`` need."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    paths.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths += [p for p in sys.path if p and os.path.isdir(p)]
    return sorted(set(paths))
