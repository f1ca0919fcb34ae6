"""Hostile programs that try sockets: to each other, to the host's services, to the network."""

from __future__ import annotations

import socket

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import RunRequest
from tests.host.sandbox.conftest import checked_runtime
from tests.host.sandbox.hostile import HOSTILE, ONE_BACKEND, run_hostile

pytestmark = pytest.mark.anyio

#: Every address family and socket type, with socket() and socketpair(): what got through.
_EVERY_FAMILY = """\
import socket
opened = []
for family in range(64):
    for kind in (1, 2, 3, 5):  # stream, datagram, raw, seqpacket
        try:
            socket.socket(family, kind).close()
            opened.append(['socket', family, kind])
        except OSError:
            pass
        try:
            a, b = socket.socketpair(family, kind)
            a.close(); b.close()
            opened.append(['socketpair', family, kind])
        except OSError:
            pass
return opened
"""


@ONE_BACKEND
async def test_no_socket_of_any_family_can_be_opened_but_a_stream_socketpair(
    rt: SubprocessRuntime,
) -> None:
    result = await run_hostile(rt, _EVERY_FAMILY)
    assert result.error is None, result.error
    unix = socket.AF_UNIX
    assert sorted(map(tuple, result.value)) == [
        ("socketpair", unix, socket.SOCK_STREAM),
        ("socketpair", unix, socket.SOCK_SEQPACKET),
    ]


@ONE_BACKEND
async def test_two_runs_cannot_meet_on_a_unix_socket(rt: SubprocessRuntime) -> None:
    # An abstract name needs no file: the classic rendezvous of two sandboxes sharing a
    # network namespace (and a bound name squats it for everyone else).
    listener = """\
import socket
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(b'\\0dsh-rendezvous')
    return 'bound'
except OSError as exc:
    return exc.errno
"""
    bound = await run_hostile(rt, listener)
    assert bound.value != "bound"
    pair = """\
import socket
a, b = socket.socketpair()
try:
    a.bind(b'\\0dsh-rendezvous')  # a socketpair's end may still take a name: not here
    return 'bound'
except OSError as exc:
    return exc.errno
"""
    squat = await run_hostile(rt, pair)
    assert squat.value != "bound"


async def test_the_process_level_cannot_reach_the_hosts_loopback(workdir_root: str) -> None:
    # The attack: a program connected to `dsh-code mcp --http` on the host's loopback and
    # approved its own call. Without `network`, no socket can be opened at all.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        program = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "    return 'connected'\n"
            "except OSError as exc:\n"
            "    return exc.errno\n"
        )
        async with checked_runtime(workdir_root, isolation="process") as rt:
            refused = await rt.run(RunRequest(program=program, limits=HOSTILE))
        async with checked_runtime(workdir_root, isolation="process", network=True) as rt:
            allowed = await rt.run(RunRequest(program=program, limits=HOSTILE))
            await anyio.sleep(0)
    assert refused.error is None and refused.value != "connected", refused
    assert allowed.value == "connected", allowed  # what `network=True` is for
