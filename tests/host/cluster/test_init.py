"""The public surface of host.cluster: exports, a light import, the CLI helper, bad input."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import types
from typing import Any

import pytest

import host.cluster
from host.cluster import ClusterError, RayRuntime, ray_runtime_from_flag
from runtime import CodeRuntime, RunRequest, RuntimeClosedError, RuntimeUsageError

pytestmark = pytest.mark.anyio


def test_all_matches_the_public_names() -> None:
    public = {
        name
        for name, value in vars(host.cluster).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert isinstance(host.cluster.__all__, tuple)
    assert len(set(host.cluster.__all__)) == len(host.cluster.__all__)
    assert set(host.cluster.__all__) == public
    for name in host.cluster.__all__:
        value = getattr(host.cluster, name)
        if isinstance(value, type | types.FunctionType):
            assert value.__module__ == "host.cluster", name


def test_import_loads_neither_ray_nor_the_sandbox() -> None:
    code = (
        "import sys, host.cluster\n"
        "print([m for m in ('ray', 'host.sandbox', 'host.cli', 'typer', 'trio')"
        " if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_a_ray_runtime_is_a_code_runtime() -> None:
    rt = RayRuntime("127.0.0.1:1")
    assert isinstance(rt, CodeRuntime)
    assert rt.language == "python"
    assert rt.isolation == "auto"
    assert RayRuntime(runtime_options={"isolation": "process"}).isolation == "process"


def test_bad_options_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="runs_per_node"):
        RayRuntime(runs_per_node=0)
    with pytest.raises(ValueError, match="no option 'bogus'"):
        RayRuntime(runtime_options={"bogus": 1})
    with pytest.raises(ValueError, match="isolation must be"):
        RayRuntime(runtime_options={"isolation": "vm"})
    with pytest.raises(ValueError, match="must be JSON"):
        RayRuntime(runtime_options={"workdir_root": b"/tmp"})
    with pytest.raises(ValueError, match="unresponsive_s"):
        RayRuntime(unresponsive_s=0)


def test_the_cli_helper() -> None:
    rt = ray_runtime_from_flag("auto", {"isolation": "process", "use_cgroups": False})
    assert isinstance(rt, RayRuntime) and rt.isolation == "process"
    with pytest.raises(ClusterError, match="needs an address"):
        ray_runtime_from_flag("  ")
    with pytest.raises(ClusterError, match=r"\(ray://\) are not supported"):
        ray_runtime_from_flag("ray://head:10001")
    with pytest.raises(ClusterError, match="no option 'nope'"):
        ray_runtime_from_flag("auto", {"nope": 1})
    assert issubclass(ClusterError, RuntimeUsageError)


async def _echo(args: Any) -> Any:
    return args


async def test_a_bad_request_raises_before_anything_travels() -> None:
    rt = RayRuntime("127.0.0.1:1")  # nothing listens there: nothing may be contacted
    with pytest.raises(RuntimeUsageError, match="not a dotted identifier"):
        await rt.run(RunRequest(program="1", bindings={"no good": _echo}))
    with pytest.raises(RuntimeUsageError, match="not lossless JSON"):
        await rt.run(RunRequest(program="1", inputs={"x": (1, 2)}))
    with pytest.raises(RuntimeUsageError, match="takes a RunRequest"):
        await rt.run("return 1")  # type: ignore[arg-type]
    with pytest.raises(RuntimeUsageError, match="call_style"):
        await rt.run(RunRequest(program="1", call_style="threads"))  # type: ignore[arg-type]
    await rt.aclose()
    with pytest.raises(RuntimeClosedError):
        await rt.run(RunRequest(program="1"))
    with pytest.raises(RuntimeClosedError):
        await rt.start()


async def test_an_address_nobody_listens_on_fails_fast() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rt = RayRuntime(f"127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(ClusterError, match=f"cannot reach the Ray cluster at 127.0.0.1:{port}"):
        await rt.run(RunRequest(program="1"))
    assert time.monotonic() - started < 10  # not Ray's minutes of retries
    await rt.aclose()


def _dead_address() -> str:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_a_stale_record_of_ray_start_gives_way_to_a_local_cluster(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from host.cluster import _ray

    dead = _dead_address()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(_ray, "_recorded_address", lambda: ("/tmp/ray/ray_current_cluster", dead))
    with caplog.at_level("WARNING", logger="host.cluster"):
        assert _ray._usable(None) == "local"  # Ray itself would retry the dead one for minutes
    assert dead in caplog.text
    with pytest.raises(ClusterError, match=f"no Ray cluster listens at {dead}"):
        _ray._usable("auto")


def test_a_live_record_and_no_record_are_left_to_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    from host.cluster import _ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(_ray, "_recorded_address", lambda: None)
    assert _ray._usable(None) is None
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        monkeypatch.setattr(_ray, "_recorded_address", lambda: ("file", address))
        assert _ray._usable(None) is None
        assert _ray._usable("auto") == "auto"


def test_ray_address_from_the_environment_is_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    from host.cluster import _ray

    dead = _dead_address()
    monkeypatch.setenv("RAY_ADDRESS", dead)
    with pytest.raises(ClusterError, match=f"cannot reach the Ray cluster at {dead}"):
        _ray._usable(None)
