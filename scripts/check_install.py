"""Install dsh-code as a user would, into clean virtual environments, and use it.

``python scripts/check_install.py [--keep DIR]`` (``scripts/check-install``; ``scripts/test`` runs
it). From a copy of the checkout (its tracked and new files) it builds a wheel and an sdist
with ``python -m build`` (no setuptools warning may show), then makes three environments,
each without the test extra, one per way of installing:

- the wheel, no extra (the runtime and the CLI): ``dsh-code run`` (stdin and a file, with a
  bindings file), ``sdk``, ``check`` and ``mcp`` (which name the extra they need), and a
  program run through ``import dsh_code``;
- the checkout's directory with the ``mcp`` extra: one ``run_code`` call over stdio with the
  MCP SDK's client (``examples/mcp/stdio_client.py``);
- the sdist with the ``pydantic-ai`` extra: the README's pydantic-ai example
  (``examples/agents/pydantic_ai_toolset.py``), offline.

Packages come from the index through pip's cache. Prints each step's time, the size of the
runtime-and-CLI environment, and exits 1 at the first step that fails, with its output.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIP_TIMEOUT_S = 900
RUN_TIMEOUT_S = 180

TOOLS = '''
from dsh_code import tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

PROGRAM = "n = await tools.add(a=2, b=3)\nprint('sum', n)\nreturn n * 10\n"

API_SCRIPT = """
import anyio
from dsh_code import Limits, RunRequest, SubprocessRuntime

async def main():
    async with SubprocessRuntime() as rt:
        result = await rt.run(RunRequest(program="import sys\\nreturn sys.version_info[0]",
                                         limits=Limits(compute_ms=5_000)))
    print(result.value, result.error)

anyio.run(main)
"""


class StepFailed(Exception):
    """A step of the check did not do what it should."""


def step(
    name: str,
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: str = "",
    expect: str = "",
    status: int = 0,
    timeout: float = RUN_TIMEOUT_S,
) -> str:
    """Run one command; its stdout and stderr together. Raises ``StepFailed``."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"{name}: no end after {timeout:g} s") from exc
    output = done.stdout + done.stderr
    took = time.monotonic() - started
    if done.returncode != status or expect not in output:
        raise StepFailed(
            f"{name}: exit {done.returncode} (wanted {status}), wanted {expect!r} in:\n{output}"
        )
    if "Traceback" in done.stderr:
        raise StepFailed(f"{name}: a traceback on stderr:\n{done.stderr}")
    print(f"  ok  {name} ({took:.1f} s)", flush=True)
    return output


def copy_checkout(target: Path) -> None:
    """The checkout's tracked and new (not ignored) files, as a clean tree."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def make_venv(where: Path) -> tuple[Path, dict[str, str]]:
    """A clean virtual environment (the base interpreter of this one); its bin and env."""
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    bin_dir = where / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(where)
    return bin_dir, env


def pip_install(name: str, bin_dir: Path, env: dict[str, str], target: str, cwd: Path) -> None:
    step(
        f"pip install {name}",
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            target,
        ],
        cwd=cwd,
        env=env,
        timeout=PIP_TIMEOUT_S,
    )


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def build(src: Path, dist: Path) -> tuple[Path, Path]:
    """``python -m build``: the wheel and the sdist; no setuptools warning may show."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    output = step(
        "python -m build",
        [sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
        cwd=src,
        env=env,
        timeout=PIP_TIMEOUT_S,
    )
    warned = [line for line in output.splitlines() if "warn" in line.lower()]
    if warned:
        raise StepFailed("python -m build warned:\n" + "\n".join(warned))
    (wheel,) = dist.glob("dsh_code-*.whl")
    (sdist,) = dist.glob("dsh_code-*.tar.gz")
    return wheel, sdist


def check_core(work: Path, src: Path, wheel: Path) -> None:
    print("the wheel, no extra (the runtime and the CLI):", flush=True)
    where = work / "core"
    bin_dir, env = make_venv(where)
    started = time.monotonic()
    pip_install("<wheel>", bin_dir, env, str(wheel), work)
    took = time.monotonic() - started
    (work / "tools.py").write_text(TOOLS, encoding="utf-8")
    (work / "prog.py").write_text(PROGRAM, encoding="utf-8")
    cli = str(bin_dir / "dsh-code")
    step(
        "dsh-code run - (stdin)",
        [cli, "run", "-"],
        cwd=work,
        env=env,
        stdin="return 1 + 1\n",
        expect="2",
    )
    step(
        "dsh-code run FILE --bindings",
        [cli, "run", "prog.py", "--bindings", "tools.py"],
        cwd=work,
        env=env,
        expect="sum 5",
    )
    step(
        "dsh-code run the demo",
        [cli, "run", "examples/programs/largest_modules.py", "--bindings", "examples/fs_tools.py"],
        cwd=src,
        env=env,
        expect="refused as expected",
    )
    step(
        "dsh-code sdk",
        [cli, "sdk", "--bindings", "tools.py"],
        cwd=work,
        env=env,
        expect="async def add(",
    )
    step(
        "dsh-code check names its extra",
        [cli, "check", "prog.py", "--bindings", "tools.py"],
        cwd=work,
        env=env,
        status=2,
        expect="dsh-code[check]",
    )
    step(
        "dsh-code mcp names its extra",
        [cli, "mcp", "--bindings", "tools.py"],
        cwd=work,
        env=env,
        status=2,
        expect="dsh-code[mcp]",
    )
    (work / "api.py").write_text(API_SCRIPT, encoding="utf-8")
    step(
        "import dsh_code: a run",
        [str(bin_dir / "python"), "api.py"],
        cwd=work,
        env=env,
        expect="3 None",
    )
    print(
        f"  the runtime and the CLI: {size_mb(where):.0f} MB installed in {took:.0f} s "
        "(the environment, pip included)",
        flush=True,
    )


def check_mcp(work: Path, src: Path) -> None:
    print("the checkout's directory, the mcp extra:", flush=True)
    bin_dir, env = make_venv(work / "mcp")
    pip_install("<checkout>[mcp]", bin_dir, env, f"{src}[mcp]", work)
    step(
        "dsh-code mcp: run_code over stdio",
        [
            str(bin_dir / "python"),
            str(src / "examples/mcp/stdio_client.py"),
            PROGRAM,
            "--bindings",
            "tools.py",
        ],
        cwd=work,
        env=env,
        expect="sum 5",
    )


def check_adapter(work: Path, src: Path, sdist: Path) -> None:
    print("the sdist, the pydantic-ai extra:", flush=True)
    bin_dir, env = make_venv(work / "adapter")
    pip_install("<sdist>[pydantic-ai]", bin_dir, env, f"{sdist}[pydantic-ai]", work)
    step(
        "the pydantic-ai example",
        [str(bin_dir / "python"), str(src / "examples/agents/pydantic_ai_toolset.py")],
        cwd=work,
        env=env,
        expect="It is 50.",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in DIR and leave it (default: a temp dir)")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dsh-install-check-") as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        src = work / "dsh-code"
        try:
            copy_checkout(src)
            wheel, sdist = build(src, work / "dist")
            check_core(work, src, wheel)
            check_mcp(work, src)
            check_adapter(work, src, sdist)
        except StepFailed as exc:
            print(f"install check FAILED: {exc}", file=sys.stderr)
            return 1
    print(f"install check passed in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
