"""Hostile programs that try to leave their containment: cgroups, host files, keyrings, IPC."""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import socket
import stat
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits
from runtime._contain import landlock_abi
from tests.host.sandbox.conftest import checked_runtime
from tests.host.sandbox.hostile import ONE_BACKEND, expect, run_hostile

pytestmark = pytest.mark.anyio

_AS_ROOT = os.geteuid() == 0
_NEEDS_ROOT = pytest.mark.skipif(not _AS_ROOT, reason="the host files case needs a root host")


# ---- cgroups -----------------------------------------------------------------------------------

#: clone3(CLONE_INTO_CGROUP) with an fd of a cgroup opened read-only: the kernel checks only
#: the DAC permission of that cgroup's cgroup.procs (Landlock does not hook it).
_CLONE_INTO_CGROUP = """\
import ctypes, os, signal, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
found = []
for root, dirs, files in os.walk('/sys/fs/cgroup'):
    if 'cgroup.procs' in files and 'cgroup.kill' in files:
        found.append(root)
    if len(found) > 3:
        break
if not found:
    return ['no-cgroup-visible']
fd = os.open(found[0], os.O_RDONLY | os.O_DIRECTORY)
CLONE_INTO_CGROUP = 0x200000000
args = struct.pack('=11Q', CLONE_INTO_CGROUP, 0, 0, 0, signal.SIGCHLD, 0, 0, 0, 0, 0, fd)
buf = ctypes.create_string_buffer(args)
pid = libc.syscall(435, buf, len(args))
if pid == 0:
    end = time.monotonic() + 2
    while time.monotonic() < end:
        pass
    os._exit(0)
if pid < 0:
    return ['refused', ctypes.get_errno()]
os.waitpid(pid, 0)
return ['escaped', found[0]]
"""


@ONE_BACKEND
async def test_clone3_into_another_cgroup_is_refused(rt: SubprocessRuntime) -> None:
    result = await run_hostile(
        rt, _CLONE_INTO_CGROUP, limits=Limits(compute_ms=500, max_wall_ms=5_000)
    )
    # Either the burner never starts, or it is billed to the run and stopped with it.
    if result.value is not None:
        assert result.value[0] in ("refused", "no-cgroup-visible"), result.value
    else:
        expect(result, "budget", "compute")


@ONE_BACKEND
async def test_writing_a_cgroup_procs_file_is_refused(rt: SubprocessRuntime) -> None:
    program = """\
import os
written = []
for root, dirs, files in os.walk('/sys/fs/cgroup'):
    if 'cgroup.procs' in files:
        try:
            with open(os.path.join(root, 'cgroup.procs'), 'w') as f:
                f.write(str(os.getpid()))
            written.append(root)
        except OSError:
            pass
return written
"""
    result = await run_hostile(rt, program)
    assert result.value == [], result


@ONE_BACKEND
async def test_the_host_cgroup_tree_is_hidden_at_the_namespaces_level(
    rt: SubprocessRuntime,
) -> None:
    if rt.isolation != "namespaces":
        pytest.skip("the process level shares the host's /sys")
    program = """\
import os
seen = []
for root, dirs, files in os.walk('/sys/fs/cgroup'):
    seen.extend(os.path.join(root, f) for f in files)
return len(seen)
"""
    result = await run_hostile(rt, program)
    assert result.value == 0, result


# ---- host files: metadata writes ---------------------------------------------------------------

_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602
_IMMUTABLE, _APPEND = 0x10, 0x20


def _flags(path: str) -> int:
    import fcntl

    buf = ctypes.c_long(0)
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf)
    except OSError:
        return -1
    finally:
        os.close(fd)
    return buf.value


def _facts(path: str) -> dict[str, Any]:
    st = os.lstat(path)
    try:
        xattrs = sorted(os.listxattr(path))
    except OSError:
        xattrs = []
    return {
        "mode": stat.S_IMODE(st.st_mode),
        "owner": (st.st_uid, st.st_gid),
        "times": (st.st_atime_ns, st.st_mtime_ns),
        "xattrs": xattrs,
        "flags": _flags(path),
    }


@pytest.fixture
def host_file() -> Iterator[str]:
    """A root-owned file outside every run's directory (in a disk-backed temp dir)."""
    base = tempfile.mkdtemp(prefix="dsh-adv-meta-", dir="/var/tmp")
    path = os.path.join(base, "victim")
    with open(path, "w") as f:
        f.write("host data\n")
    os.chmod(path, 0o644)
    os.chmod(base, 0o755)
    yield path
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, ctypes.c_long(0))
        except OSError:
            pass
        finally:
            os.close(fd)
    except OSError:
        pass
    os.remove(path)
    os.rmdir(base)


_META_WRITES = """\
import ctypes, fcntl, os
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = 'done'
    except OSError as e:
        results[name] = e.errno
attempt('chmod', lambda: os.chmod(path, 0o4777))
attempt('chown', lambda: os.chown(path, 1234, 1234))
attempt('utime', lambda: os.utime(path, (0, 0)))
attempt('setxattr', lambda: os.setxattr(path, 'user.dsh', b'x'))
attempt('setxattr-trusted', lambda: os.setxattr(path, 'trusted.dsh', b'x'))
def setflags():
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, 0x40086602, ctypes.c_long(0x10 | 0x20))
    finally:
        os.close(fd)
attempt('setflags', setflags)
return results
"""


@_NEEDS_ROOT
@ONE_BACKEND
async def test_metadata_of_host_files_cannot_be_changed(
    rt: SubprocessRuntime, host_file: str
) -> None:
    before = _facts(host_file)
    result = await run_hostile(rt, _META_WRITES, inputs={"path": host_file})
    assert result.error is None, result.error
    assert "done" not in result.value.values(), result.value
    assert _facts(host_file) == before


@_NEEDS_ROOT
@ONE_BACKEND
async def test_the_program_holds_no_capability(rt: SubprocessRuntime) -> None:
    program = """\
caps = {}
for line in open('/proc/self/status'):
    key, _, value = line.partition(':')
    if key in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'):
        caps[key] = int(value.strip(), 16)
return caps
"""
    result = await run_hostile(rt, program)
    assert result.value == dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), 0)


@_NEEDS_ROOT
@ONE_BACKEND
async def test_the_program_does_not_run_as_the_host_root(rt: SubprocessRuntime) -> None:
    program = """\
import os
uids = {}
for line in open('/proc/self/status'):
    if line.startswith(('Uid:', 'Gid:')):
        key, value = line.split(':', 1)
        uids[key] = [int(v) for v in value.split()]
return uids
"""
    result = await run_hostile(rt, program)
    assert result.error is None, result.error
    if rt.isolation == "process":
        assert all(uid != 0 for uid in result.value["Uid"]), result.value
    # At the namespaces level the ids are those inside the user namespace: what matters is
    # what they map to on the host, which test_metadata_of_host_files_cannot_be_changed shows.


@_NEEDS_ROOT
@ONE_BACKEND
async def test_the_host_file_system_is_read_only_outside_the_workdir(
    rt: SubprocessRuntime,
) -> None:
    if not rt.containment["read_only_root"]:
        pytest.skip("no read-only view here (the process level of a host that is not root)")
    program = """\
import os
flags = {}
for line in open('/proc/self/mountinfo'):
    fields = line.split()
    flags[fields[4]] = fields[5].split(',')
wd = os.getcwd()
mount = max((m for m in flags if wd == m or wd.startswith(m.rstrip('/') + '/')), key=len)
return {'root': 'ro' in flags.get('/', []), 'workdir': 'rw' in flags[mount]}
"""
    result = await run_hostile(rt, program)
    assert result.value == {"root": True, "workdir": True}, result


# ---- the host's keyrings -----------------------------------------------------------------------

_SYS_ADD_KEY, _SYS_KEYCTL = 248, 250
_KEY_SPEC_SESSION = -3
_KEYCTL_UNLINK = 9


@pytest.fixture
def session_key() -> Iterator[str]:
    """A secret key in the host's session keyring."""
    if os.uname().machine != "x86_64":
        pytest.skip("the syscall numbers here are x86_64's")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    name = f"dsh-adv-{secrets.token_hex(4)}".encode()
    payload = secrets.token_hex(8).encode()
    key = libc.syscall(_SYS_ADD_KEY, b"user", name, payload, len(payload), _KEY_SPEC_SESSION)
    if key < 0:
        pytest.skip(f"no session keyring here (errno {ctypes.get_errno()})")
    yield name.decode()
    libc.syscall(_SYS_KEYCTL, _KEYCTL_UNLINK, key, _KEY_SPEC_SESSION)


_KEYRING = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEYCTL_SEARCH = 10
found = libc.syscall(250, KEYCTL_SEARCH, -3, b'user', name.encode(), 0)
added = libc.syscall(248, b'user', planted.encode(), b'x', 1, -3)
return {'found': found, 'added': added}
"""


@ONE_BACKEND
async def test_the_host_session_keyring_is_out_of_reach(
    rt: SubprocessRuntime, session_key: str
) -> None:
    planted = f"dsh-planted-{secrets.token_hex(4)}"
    result = await run_hostile(rt, _KEYRING, inputs={"name": session_key, "planted": planted})
    assert result.error is None, result.error
    assert result.value["found"] < 0, result.value
    # a key added by the program (if the kernel let it) must not land in the host's keyring
    with open("/proc/keys") as f:
        assert planted not in f.read()


# ---- IPC objects ---------------------------------------------------------------------------------

_IPC_MAKE = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
made = {}
made['shm'] = libc.shmget(key, 1 << 20, IPC_CREAT | 0o666)
made['msg'] = libc.msgget(key, IPC_CREAT | 0o666)
made['sem'] = libc.semget(key, 1, IPC_CREAT | 0o666)
return made
"""

_IPC_FIND = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
return {'shm': libc.shmget(key, 0, 0), 'msg': libc.msgget(key, 0), 'sem': libc.semget(key, 0, 0)}
"""


def _host_ipc_keys() -> set[int]:
    keys: set[int] = set()
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                next(f)
                keys.update(int(line.split()[0]) for line in f if line.strip())
        except OSError:
            continue
    return keys


@ONE_BACKEND
async def test_ipc_objects_do_not_outlive_the_run(rt: SubprocessRuntime) -> None:
    key = int.from_bytes(secrets.token_bytes(3), "big") + 1
    await run_hostile(rt, _IPC_MAKE, inputs={"key": key}, probe=False)
    later = await run_hostile(rt, _IPC_FIND, inputs={"key": key})
    assert later.value == {"shm": -1, "msg": -1, "sem": -1}, later.value
    assert key not in _host_ipc_keys()


# ---- socket buffers ------------------------------------------------------------------------------

_TCP_HOARD = """\
import socket, subprocess
try:
    subprocess.run(['ip', 'link', 'set', 'lo', 'up'], capture_output=True)
except OSError:
    pass
try:
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(64)
except OSError as e:
    return ['no-loopback', e.errno]
held, conns = 0, []
for _ in range(100):
    try:
        c = socket.create_connection(server.getsockname())
    except OSError:
        break
    s, _ = server.accept()
    conns.append((c, s))
    c.setblocking(False)
    try:
        while True:
            held += c.send(b'x' * 65536)
    except (BlockingIOError, OSError):
        pass
return ['held', held]
"""


@ONE_BACKEND
async def test_socket_buffers_count_against_the_memory_cap(rt: SubprocessRuntime) -> None:
    limits = Limits(compute_ms=5_000, max_wall_ms=10_000, max_heap_mb=64)
    result = await run_hostile(rt, _TCP_HOARD, limits=limits)
    if result.error is not None:
        expect(result, "memory")
        return
    kind, amount = result.value
    if kind == "held":
        # the run's memory cap is max_heap_mb + 64 MiB headroom: buffers must stay within it
        assert amount <= (64 + 64) << 20, f"{amount >> 20} MiB of socket buffers held"


# ---- each layer, checked directly ------------------------------------------------------------


@ONE_BACKEND
async def test_the_seccomp_filter_is_loaded_and_clone3_gets_enosys(rt: SubprocessRuntime) -> None:
    # Another layer refusing clone3 would hide a filter never loaded: ENOSYS is the filter's.
    program = """\
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(88)
got = libc.syscall(435, buf, 88)
mode = [line.split()[1] for line in open('/proc/self/status') if line.startswith('Seccomp:')]
return [got, errno.errorcode.get(ctypes.get_errno()), mode]
"""
    result = await run_hostile(rt, program)
    assert result.value == [-1, "ENOSYS", ["2"]]


@_NEEDS_ROOT
@ONE_BACKEND
async def test_the_real_effective_and_saved_uids_and_gids_are_unprivileged(
    rt: SubprocessRuntime,
) -> None:
    program = "import os\nreturn [list(os.getresuid()), list(os.getresgid()), os.getgroups()]"
    result = await run_hostile(rt, program)
    assert result.error is None, result.error
    uids, gids, groups = result.value
    assert 0 not in uids and len(set(uids)) == 1, uids
    assert 0 not in gids and len(set(gids)) == 1, gids
    assert 0 not in groups, groups
    assert result.stats is not None


@ONE_BACKEND
async def test_no_new_privs_is_set(rt: SubprocessRuntime) -> None:
    program = (
        "return [l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')]"
    )
    result = await run_hostile(rt, program)
    assert result.value == ["1"]


@ONE_BACKEND
async def test_no_process_but_the_runs_own_is_in_sight(rt: SubprocessRuntime) -> None:
    # The host's processes (command lines with secrets in them), the template, other runs:
    # /proc shows a run its own processes only (a PID namespace, or hidepid and a uid of its own).
    program = """\
import os
if os.fork() == 0:
    import time
    time.sleep(5)
    os._exit(0)
mine = {os.getpid()}
seen = {int(p) for p in os.listdir('/proc') if p.isdigit()}
return sorted(seen - mine)
"""
    result = await run_hostile(rt, program)
    assert result.error is None, result.error
    assert len(result.value) <= 2, result.value  # its own child (and, per child, an init)


async def test_the_landlock_domain_is_in_force(workdir_root: str) -> None:
    # Checked through what Landlock alone refuses (ABI >= 6): an abstract unix socket outside
    # the run's domain. Sockets are allowed here, so seccomp does not refuse first.
    if landlock_abi() < 6:
        pytest.skip(f"Landlock ABI {landlock_abi()} < 6 does not scope abstract sockets")
    name = f"\0dsh-landlock-{secrets.token_hex(4)}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as host_side:
        host_side.bind(name)
        host_side.listen()
        program = (
            "import socket\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "try:\n"
            f"    s.connect({name!r})\n"
            "    return 'connected'\n"
            "except OSError as exc:\n"
            "    return exc.errno\n"
        )
        async with checked_runtime(workdir_root, isolation="process", network=True) as rt:
            result = await run_hostile(rt, program)
    assert result.value == errno.EPERM, result
