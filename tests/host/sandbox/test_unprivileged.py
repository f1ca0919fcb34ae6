"""The runtime on a host that is not root: each child contains itself (a user namespace first).

CI runs as root, where the template prepares every child; this runs a host process as uid
1000 of a user namespace of its own (``unshare --user``), so the per-child path is tested
too: both isolation levels, a failure, the budgets, the sockets and the calls on others.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.host.sandbox.hostile import REPO

_SCRIPT = textwrap.dedent(
    """\
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import anyio
    from host.sandbox import SubprocessRuntime
    from runtime import Limits, RunRequest

    PROGRAMS = {
        "who": "import os\\nreturn [os.geteuid(), os.getpid() > 1]",
        "raises": "raise ValueError('no')",
        "burns": "while True:\\n    pass",
        "socket": "import socket\\nsocket.socket()",
        "others": "import os\\nos.setpriority(os.PRIO_PROCESS, os.getppid() or 1, 5)",
    }

    async def main():
        out = {}
        for level in ("namespaces", "process"):
            async with SubprocessRuntime(isolation=level) as rt:
                facts = {"isolation": rt.isolation}
                for name, program in PROGRAMS.items():
                    result = await rt.run(RunRequest(
                        program=program, limits=Limits(compute_ms=300, max_wall_ms=10_000)
                    ))
                    facts[name] = (
                        result.value if result.error is None
                        else [result.error.kind, result.error.exception_type]
                    )
                facts["cgroups"] = list(rt.cgroups)
                out[level] = facts
        print(json.dumps(out))

    anyio.run(main)
    """
)


def _unshare() -> str:
    found = shutil.which("unshare")
    if found is None:
        pytest.skip("no unshare(1) here")
    probe = subprocess.run(
        [found, "--user", "--map-user=1000", "--map-group=1000", "true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"no user namespace here: {probe.stderr.decode().strip()}")
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="run as root to simulate a host that is not")
def test_a_host_that_is_not_root_contains_each_child_itself() -> None:
    done = subprocess.run(
        [
            _unshare(),
            "--user",
            "--map-user=1000",
            "--map-group=1000",
            sys.executable,
            "-c",
            _SCRIPT,
            REPO,
        ],
        env={"HOME": "/tmp"},
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.splitlines()[-1])
    for level, seen in facts.items():
        assert seen["isolation"] == level
        assert seen["who"] == [1000, True]
        assert seen["raises"] == ["exception", "ValueError"]
        assert seen["burns"] == ["budget", None]
        assert seen["socket"] == ["exception", "PermissionError"]
        assert seen["others"] == ["exception", "PermissionError"]
        assert seen["cgroups"] == []  # an unprivileged host without a delegated cgroup
