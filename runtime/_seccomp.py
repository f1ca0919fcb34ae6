"""The seccomp filter every program runs under, built once by the template with libseccomp.

Default allow, and a deny list in the spirit of container runtimes' default profiles: no
``clone3`` (``ENOSYS``, so libc falls back to ``clone``, whose flags a filter can read: it
could otherwise place a child in any cgroup it can open, with ``CLONE_INTO_CGROUP``), no new
namespaces, no mounts, no keyrings, no kernel modules, BPF, perf, io_uring and the like. A
program of another architecture's ABI (``int 0x80``) is killed.

A program acts on itself only: the calls that change another process's limits, priority,
scheduling or I/O priority, or read its limits, memory or file descriptors, take pid (or who)
0, "this process", or fail with ``EPERM`` (the kernel checks them only by uid, so another run
of the same uid would be within reach). Reading scheduling settings stays open: libc asks for
them by thread id (``pthread_getattr_np``, which Deno's threads call), and they tell nothing. Without ``network``, a program has no sockets but
``socketpair`` (stream or seqpacket): ``socket``, ``bind``, ``connect``, ``listen`` and
``accept`` fail with ``EPERM``, so no run can reach another, the host's services or its
network through any address family, nor squat a name another would use.
"""

from __future__ import annotations

import errno
import os
from typing import Any

__all__ = ("DENIED", "ON_OTHERS", "build_filter")

#: Syscalls a program has no business making (EPERM).
DENIED = [
    "acct",
    "add_key",
    "bpf",
    "delete_module",
    "fanotify_init",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "setns",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "stime",
    "swapoff",
    "swapon",
    "syslog",
    "umount",
    "umount2",
    "unshare",
    "userfaultfd",
    "vhangup",
]
#: SysV IPC and POSIX message queues, denied where the run has no IPC namespace of its own.
IPC = ["shmget", "msgget", "semget", "mq_open"]
#: Calls that act on the process their first (or second) argument names: allowed with 0 only.
ON_OTHERS = {
    "prlimit64": 0,
    "sched_setaffinity": 0,
    "sched_setscheduler": 0,
    "sched_setparam": 0,
    "sched_setattr": 0,
    "migrate_pages": 0,
    "move_pages": 0,
    "get_robust_list": 0,
    "setpriority": 1,  # (which, who): who 0 is the caller; which must be PRIO_PROCESS
    "ioprio_set": 1,  # (which, who): who 0 is the caller; which must be IOPRIO_WHO_PROCESS
}
#: Calls on another process's memory or fds, or comparing processes: never.
_ON_OTHERS_ALWAYS = [
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "kcmp",
    "pidfd_getfd",
]
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1
_AF_UNIX = 1
_SOCK_STREAM, _SOCK_SEQPACKET = 1, 5
#: Without network: socket calls a program never needs for a socketpair.
_SOCKET_CALLS = ["socket", "bind", "connect", "listen", "accept", "accept4"]
_CLONE_NAMESPACES = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)


def _add(rules: Any, action: Any, name: str, *args: Any) -> None:
    try:
        rules.add_rule(action, name, *args)
    except (OSError, ValueError):
        pass  # not a syscall on this architecture


def _act_on_self_only(rules: Any, seccomp: Any) -> None:
    eperm = seccomp.ERRNO(errno.EPERM)
    for name, index in ON_OTHERS.items():
        _add(rules, eperm, name, seccomp.Arg(index, seccomp.NE, 0))
    for name, which in (
        ("setpriority", _PRIO_PROCESS),
        ("ioprio_set", _IOPRIO_WHO_PROCESS),
    ):
        _add(rules, eperm, name, seccomp.Arg(0, seccomp.NE, which))
    for name in _ON_OTHERS_ALWAYS:
        _add(rules, eperm, name)


def _socketpairs_only(rules: Any, seccomp: Any) -> None:
    eperm = seccomp.ERRNO(errno.EPERM)
    for name in _SOCKET_CALLS:
        _add(rules, eperm, name)
    _add(rules, eperm, "socketpair", seccomp.Arg(0, seccomp.NE, _AF_UNIX))
    for kind in range(16):  # the type's low bits (the rest are SOCK_NONBLOCK, SOCK_CLOEXEC)
        if kind not in (_SOCK_STREAM, _SOCK_SEQPACKET):
            # a datagram pair could be pointed at any named socket with sendto/sendmsg
            _add(rules, eperm, "socketpair", seccomp.Arg(1, seccomp.MASKED_EQ, 0xF, kind))


def build_filter(*, deny_ipc: bool, network: bool = False) -> tuple[bytes, str]:
    """The filter as BPF bytes (for ``load_seccomp``), or (b"", why not) without libseccomp;
    ``network`` leaves sockets alone."""
    try:
        import pyseccomp as seccomp
    except (ImportError, RuntimeError, OSError) as exc:  # no libseccomp.so on this machine
        return b"", f"libseccomp is not available: {exc}"
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        for flag in _CLONE_NAMESPACES:
            rules.add_rule(
                seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag)
            )
        for name in DENIED + (IPC if deny_ipc else []):
            _add(rules, seccomp.ERRNO(errno.EPERM), name)
        _act_on_self_only(rules, seccomp)
        if not network:
            _socketpairs_only(rules, seccomp)
        memfd = os.memfd_create("dsh-seccomp", os.MFD_CLOEXEC)
        try:
            with os.fdopen(os.dup(memfd), "wb") as out:
                rules.export_bpf(out)
            return os.pread(memfd, 1 << 20, 0), ""
        finally:
            os.close(memfd)
    except (OSError, ValueError, RuntimeError) as exc:
        return b"", f"the seccomp filter could not be built: {exc}"
