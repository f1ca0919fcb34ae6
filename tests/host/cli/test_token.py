"""The bearer token of ``dsh-code mcp``: taken from the environment, wiped from /proc."""

from __future__ import annotations

import subprocess
import sys

from .support import env


def test_the_token_is_wiped_from_the_command_line_and_environment() -> None:
    token = "wiped-0123456789-abcdef"
    script = (
        "import os\n"
        "from host.cli._token import take_token_env, wipe_from_proc\n"
        f"wipe_from_proc({token!r})\n"
        "print(take_token_env())\n"
        "print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[-3:-1])\n"
        f"print({token!r}.encode() in open('/proc/self/environ', 'rb').read())\n"
        "print(os.environ.get('DSH_CODE_MCP_TOKEN'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "--token", token],
        env=env(DSH_CODE_MCP_TOKEN=token),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.splitlines() == [
        token,  # what was taken is the real token
        f"[b'--token', b'{'*' * len(token)}']",
        "False",
        "None",
    ]
