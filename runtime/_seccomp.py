"""The seccomp filter every program runs under, built once by the template with libseccomp.

Default allow, and a deny list in the spirit of container runtimes' default profiles: no
``clone3`` (``ENOSYS``, so libc falls back to ``clone``, whose flags a filter can read: it
could otherwise place a child in any cgroup it can open, with ``CLONE_INTO_CGROUP``), no new
namespaces, no mounts, no keyrings, no kernel modules, BPF, perf, io_uring and the like. A
program of another architecture's ABI (``int 0x80``) is killed.
"""

from __future__ import annotations

import errno
import os

__all__ = ("DENIED", "build_filter")

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


def build_filter(*, deny_ipc: bool) -> tuple[bytes, str]:
    """The filter as BPF bytes (for ``load_seccomp``), or (b"", why not) without libseccomp."""
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
            try:
                rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (OSError, ValueError):
                continue  # not a syscall on this architecture
        memfd = os.memfd_create("dsh-seccomp", os.MFD_CLOEXEC)
        try:
            with os.fdopen(os.dup(memfd), "wb") as out:
                rules.export_bpf(out)
            return os.pread(memfd, 1 << 20, 0), ""
        finally:
            os.close(memfd)
    except (OSError, ValueError, RuntimeError) as exc:
        return b"", f"the seccomp filter could not be built: {exc}"
