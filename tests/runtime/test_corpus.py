"""Programs run as ``python prog.py`` runs them: each case is run both ways, and CPython's own
behaviour (its output, and the last line of its traceback) is the expectation."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

import anyio
import pytest

from host.sandbox import SubprocessRuntime
from runtime import Limits, RunRequest

pytestmark = pytest.mark.anyio

#: A stand-in for the bindings under plain CPython: ``tools.echo`` answers what it is given,
#: awaited or called plainly, as dsh-code's bindings do (installed as a builtin, then the
#: program runs as ``__main__`` through runpy, as ``python prog.py`` would).
_CPYTHON_BOOT = textwrap.dedent(
    """\
    import asyncio, builtins, runpy, sys, types
    style = sys.argv[2]
    async def _echo(**kw):
        await asyncio.sleep(0)
        return kw
    def echo(**kw):
        return _echo(**kw) if style == "async" else kw
    builtins.tools = types.SimpleNamespace(echo=echo)
    sys.argv = sys.argv[1:2]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)

CASES: dict[str, str] = {
    "global-statement": """\
x = 1
def bump():
    global x
    x += 1
bump(); bump()
print(x)
""",
    "nonlocal-in-nested": """\
def outer():
    n = 0
    def inc():
        nonlocal n
        n += 1
    inc(); inc()
    return n
print(outer())
""",
    "class-body-reads-a-global-it-assigns": """\
y = 'global'
class C:
    print(y)
    y = 'class'
print(C.y, y)
""",
    "exec-and-eval-see-program-globals": """\
a = 5
exec("b = a * 2")
print(b, eval("a + b"))
""",
    "locals-in-a-nested-function": """\
top = 1
def f():
    inner = 2
    return sorted(locals())
print(f())
""",
    "name-error-before-assignment": """\
print(undefined_name)
""",
    "globals-lists-program-names": """\
alpha = 1
print(sorted(k for k in globals() if not k.startswith('__') and k != 'tools'))
""",
    "qualname-in-a-type-error": """\
def f(x):
    return x
f()
""",
    "dataclass-repr": """\
from dataclasses import dataclass
@dataclass
class P:
    x: int
    y: int
print(P(1, 2))
print(P.__qualname__, P.__module__)
""",
    "default-repr-names-the-module": """\
class A:
    pass
print(repr(A()).split(' object at ')[0])
""",
    "future-annotations-and-dataclasses": """\
from __future__ import annotations
from dataclasses import dataclass, fields
import typing
@dataclass
class Item:
    name: str
    tags: list[str]
print([f.type for f in fields(Item)])
print(typing.get_type_hints(Item))
""",
    "star-import": """\
from math import *
print(floor(pi), sqrt(16))
""",
    "name-main-block": """\
def main():
    return 'main ran'
if __name__ == "__main__":
    print(main(), __name__)
""",
    "asyncio-run-of-main": """\
import asyncio
async def main():
    await asyncio.sleep(0)
    return 'done'
print(asyncio.run(main()))
""",
    "asyncio-run-with-awaited-tool-calls": """\
import asyncio
async def main():
    a, b = await asyncio.gather(tools.echo(n=1), tools.echo(n=2))
    return [a, b]
print(asyncio.run(main()))
""",
    "stop-iteration-at-top-level": """\
it = iter([])
next(it)
""",
    "generators-and-async-generators": """\
import asyncio
def gen():
    yield 1
    yield from [2, 3]
async def agen():
    for i in range(3):
        yield i
async def collect():
    return [i async for i in agen()]
print(list(gen()), asyncio.run(collect()))
""",
    "context-managers": """\
import contextlib
@contextlib.contextmanager
def cm(log):
    log.append('enter')
    try:
        yield 'value'
    finally:
        log.append('exit')
log = []
with cm(log) as v:
    log.append(v)
print(log)
""",
    "recursion-limit-is-the-default": """\
import sys
print(sys.getrecursionlimit())
""",
    "set-recursion-limit-low": """\
import sys
sys.setrecursionlimit(40)
def down(n):
    return down(n + 1)
try:
    down(0)
except RecursionError as e:
    print('RecursionError', e)
""",
    "lambda-and-closure-qualnames": """\
def make():
    return lambda: 1
print(make().__qualname__, make.__qualname__)
""",
    "exception-chaining": """\
try:
    {}['k']
except KeyError as e:
    raise ValueError('wrapped') from e
""",
    "system-exit-is-a-failure": """\
import sys
print('before')
sys.exit(3)
""",
    "file-is-defined": """\
print(type(__file__).__name__)
""",
    "bom-at-the-start": "\ufeffprint('bom ok')\n",
    "int-of-4300-digits": """\
n = int('9' * 4300)
print(len(str(n)))
""",
    "match-statement": """\
def kind(v):
    match v:
        case {'k': x}:
            return f'dict {x}'
        case [a, b]:
            return f'pair {a} {b}'
        case _:
            return 'other'
print(kind({'k': 1}), kind([1, 2]), kind(3))
""",
    "class-attribute-lookup-in-methods": """\
class Counter:
    total = 0
    def add(self):
        Counter.total += 1
        return Counter.total
c = Counter(); c.add()
print(c.add(), Counter.__qualname__)
""",
    "sync-tool-call-from-a-thread": """\
import threading
out = []
t = threading.Thread(target=lambda: out.append(tools.echo(n=7)))
t.start(); t.join()
print(out)
""",
}

#: Cases whose bindings are plain calls (the others await them, where they call any).
SYNC_CASES = {"sync-tool-call-from-a-thread"}


def _cpython(program: str, style: str) -> tuple[list[str], int, str]:
    """``python prog.py``: its stdout lines, exit code, and the last line of its stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "prog.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(program)
        # a program without bindings runs exactly as `python prog.py`; one with them through
        # the stand-in above (runpy adds a few frames of its own below the program's)
        command = [sys.executable, "-I", path]
        if "tools." in program:
            command = [sys.executable, "-I", "-c", _CPYTHON_BOOT, path, style]
        done = subprocess.run(
            command,
            capture_output=True,
            timeout=60,
            cwd=tmp,
            check=False,
        )
    err = done.stderr.decode().strip().splitlines()
    return done.stdout.decode().splitlines(), done.returncode, err[-1] if err else ""


async def _dsh(program: str, style: str) -> Any:
    async def echo(args: Any) -> Any:
        return args

    async with SubprocessRuntime(isolation="process") as rt:
        return await rt.run(
            RunRequest(
                program=program,
                bindings={"tools.echo": echo},
                call_style=style,  # type: ignore[arg-type]
                limits=Limits(compute_ms=10_000, max_wall_ms=30_000),
            )
        )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_program_behaves_as_under_python(name: str) -> None:
    program = CASES[name]
    style = "sync" if name in SYNC_CASES else "async"
    out, code, last = await anyio.to_thread.run_sync(_cpython, program, style)
    result = await _dsh(program, style)
    if code == 0:
        assert result.error is None, result.error
        assert result.logs == out
        return
    # CPython failed: so must we, with what it printed first and the same last line
    assert result.error is not None, f"CPython failed with {last!r}; we returned {result.value!r}"
    assert result.logs == out
    if result.error.kind == "parse":
        assert last.startswith(f"{result.error.exception_type}: ")
        assert last.split(": ", 1)[1] in result.error.message
    elif last:
        assert result.error.message.splitlines()[-1] == last
    else:  # SystemExit prints nothing: it is an `exception` here, as documented
        assert result.error.exception_type == "SystemExit"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_recursion_reaches_as_deep_as_under_python() -> None:
    program = (
        "def down(n):\n"
        "    try:\n        return down(n + 1)\n"
        "    except RecursionError:\n        return n\n"
        "print(down(0))\n"
    )
    out, code, _ = await anyio.to_thread.run_sync(_cpython, program, "async")
    result = await _dsh(program, "async")
    assert code == 0 and result.error is None, result.error
    # the program's first frame is within a few of where a script's is
    assert abs(int(result.logs[0]) - int(out[0])) <= 8, (result.logs, out)
