"""What the child gives up before a program runs: capabilities, root, the host's keyring,
syscalls (seccomp), and CPU past its budget (a CPU-clock timer of its own)."""

from __future__ import annotations

import ctypes
import os
import signal
import struct

__all__ = (
    "become",
    "clear_capabilities",
    "defer_repeats",
    "drop_bounding_set",
    "join_new_session_keyring",
    "load_seccomp",
    "start_cpu_timer",
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: keyctl(2) by architecture (glibc has no wrapper).
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_JOIN_SESSION_KEYRING = 1
_CLOCK_PROCESS_CPUTIME_ID = 2
_SIGEV_SIGNAL = 0
_TIMER_ABSTIME = 1
_SA_NODEFER = 0x40000000


def _error(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


_LAST_CAP = _last_cap()


def drop_bounding_set() -> None:
    """Empty the bounding and ambient sets: no capability can be gained by exec after this.

    Needs CAP_SETPCAP (root, or inside our own user namespace); without it the process had
    no capability to gain anyway.
    """
    for cap in range(_LAST_CAP + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets."""
    header = struct.pack("=Ii", _LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two empty {effective, permitted, inheritable} triples
    if _libc.capset(header, data) != 0:
        raise _error("capset")


def become(uid: int, gid: int) -> None:
    """Switch every id to ``uid``/``gid`` (no supplementary groups); the kernel then clears
    the capabilities root had, and the parent-death signal (set it again after)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    # The change of ids made us non-dumpable: our /proc files would stay root's, and we could
    # not write our own uid_map. Cores stay off (RLIMIT_CORE 0); Landlock keeps ptrace in.
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def join_new_session_keyring() -> None:
    """Leave the host's session keyring for a new, empty, anonymous one."""
    number = _SYS_KEYCTL.get(os.uname().machine)
    if number is not None:
        _libc.syscall(
            number, _KEYCTL_JOIN_SESSION_KEYRING, None
        )  # best effort: seccomp denies keyctl later


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_seccomp(program: bytes) -> None:
    """Load a seccomp BPF filter (built once by the template); needs no_new_privs first."""
    if not program:
        return
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise _error("seccomp")


class _SigEvent(ctypes.Structure):
    _fields_ = [
        ("value", ctypes.c_void_p),
        ("signo", ctypes.c_int),
        ("notify", ctypes.c_int),
        ("pad", ctypes.c_byte * 48),
    ]


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class _ItimerSpec(ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


def start_cpu_timer(budget_ns: int) -> None:
    """SIGXCPU (whose default action ends the process) once this process has used
    ``budget_ns`` more of CPU, on its own clock: no poll of the host's is needed to stop a hot
    loop. The host's measurement of the whole run stays the authority (and the backstop for
    descendants, and for a program that blocks the signal)."""
    event = _SigEvent(None, signal.SIGXCPU, _SIGEV_SIGNAL)
    timer = ctypes.c_void_p()
    if _libc.timer_create(_CLOCK_PROCESS_CPUTIME_ID, ctypes.byref(event), ctypes.byref(timer)):
        raise _error("timer_create")
    deadline = time_ns_cpu() + budget_ns
    spec = _ItimerSpec(
        _Timespec(0, 0), _Timespec(deadline // 1_000_000_000, deadline % 1_000_000_000)
    )
    if _libc.timer_settime(timer, _TIMER_ABSTIME, ctypes.byref(spec), None):
        raise _error("timer_settime")


def time_ns_cpu() -> int:
    """This process's CPU time (all threads), in nanoseconds."""
    import time

    return time.clock_gettime_ns(_CLOCK_PROCESS_CPUTIME_ID)


class _Sigaction(ctypes.Structure):
    """glibc's and musl's ``struct sigaction`` on Linux (its 1024-bit mask included)."""

    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ulong * (1024 // (8 * ctypes.sizeof(ctypes.c_ulong)))),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


def defer_repeats(signum: int) -> None:
    """Make ``signum`` arriving while its handler runs wait for the handler to return.

    ``faulthandler.register(chain=True)`` lets it in at once, and its nested call skips the
    dump and chains to the default action: a second ask at a budget would end the process
    with half its stacks written. Deferred, it comes after the first dump, whole.
    """
    action = _Sigaction()
    if _libc.sigaction(signum, None, ctypes.byref(action)):
        raise _error("sigaction")
    action.flags &= ~_SA_NODEFER
    if _libc.sigaction(signum, ctypes.byref(action), None):
        raise _error("sigaction")
