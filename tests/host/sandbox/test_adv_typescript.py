"""Hostile TypeScript programs: Deno refused, the bridge polluted and forged, loops, growths, floods."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from host.sandbox import TypeScriptRuntime
from runtime import Limits, RunRequest, RunResult

pytestmark = pytest.mark.anyio

FAST = Limits(compute_ms=3_000, max_wall_ms=15_000)
#: Makes node's process (and so node:fs, a way to the raw pipes) for a program.
_RAW = (
    "process;\nconst fs = await import('node:fs');\n"
    "const frame = (text: string) => { const body = new TextEncoder().encode(text);\n"
    "  const out = new Uint8Array(4 + body.length); new DataView(out.buffer).setUint32(0, body.length);\n"
    "  out.set(body, 4); return out; };\n"
)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """The contract suite covers every loop; these need two."""
    return request.param


async def _add(args: Any) -> Any:
    return args["a"] + args["b"]


async def run(ts: TypeScriptRuntime, program: str, **kwargs: Any) -> RunResult:
    kwargs.setdefault("limits", FAST)
    kwargs.setdefault("bindings", {"tools.add": _add})
    return await ts.run(RunRequest(program=program, **kwargs))


async def test_deno_and_every_capability_is_refused(ts: TypeScriptRuntime) -> None:
    probes = {
        "Deno": "typeof Deno",
        "globalThis.Deno": "typeof (globalThis as any).Deno",
        "read": "(globalThis as any).Deno.readTextFileSync('/etc/hostname')",
        "env": "process.env.HOME",
        "fetch": "await fetch('http://127.0.0.1:9/')",
        "remote import": "await import('https://example.com/x.js')",
        "npm import": "await import('npm:left-pad')",
        "jsr import": "await import('jsr:@std/path')",
        "node fs read": "process; (await import('node:fs')).readFileSync('/etc/hostname')",
        "node child_process": "process; (await import('node:child_process')).execSync('id')",
        "worker": "new Worker('data:text/javascript,1', { type: 'module' })",
    }
    program = (
        "const out: Record<string, string> = {};\n"
        + "".join(
            f"try {{ const v = {expr}; out[{name!r}] = 'allowed: ' + String(v); }} "
            f"catch (e) {{ out[{name!r}] = 'refused'; }}\n"
            for name, expr in probes.items()
        )
        + "return out;"
    )
    result = await run(ts, program)
    assert result.error is None, result.error
    got = dict(result.value)
    assert got.pop("Deno") == got.pop("globalThis.Deno") == "allowed: undefined"
    assert got == dict.fromkeys(got, "refused"), got


async def test_prototype_pollution_does_not_reach_the_bridge(ts: TypeScriptRuntime) -> None:
    program = (
        "for (const key of ['id', 'type', 'name', 'args', 'value', 'resolve', 'reject', 'site',"
        " 'has_value', 'kind', 'message', 'then', 'toJSON', 'stack']) {\n"
        "  Object.defineProperty(Object.prototype, key, { __proto__: null, set() { throw new Error('set ' + key); },"
        " get() { return undefined; }, configurable: true });\n}\n"
        "JSON.stringify = () => 'garbage';\nJSON.parse = () => ({ type: 'Reply', id: 1, value: 666 });\n"
        "Array.prototype.join = () => 'x';\nArray.prototype.push = () => 0;\n"
        "String.prototype.split = () => [];\nUint8Array.prototype.set = () => {};\n"
        "Reflect.apply = () => { throw new Error('apply'); };\n"
        "let refused = '';\n"
        "try { Function.prototype.call = () => { throw new Error('call'); }; }"
        " catch (e) { refused = (e as Error).name; }\n"
        "Map.prototype.get = () => undefined;\nTextEncoder.prototype.encode = () => new Uint8Array(0);\n"
        "Set.prototype.has = () => true;\nSet.prototype.add = () => { throw new Error('add'); };\n"
        "const a = await tools.add({ a: 1, b: 2 });\nconst b = await tools.add({ a: a, b: 10 });\n"
        "console.log('still logging');\nreturn { a, b, list: [1, 'two'], refused };"
    )
    result = await run(ts, program)
    assert result.error is None, result.error
    assert result.value == {"a": 3, "b": 13, "list": [1, "two"], "refused": "TypeError"}
    assert result.logs == ["still logging"]


@pytest.mark.parametrize(
    ("program", "needle"),
    [
        ("return { x: { toJSON() { throw new Error('no'); } } };", "toJSON at $.x threw Error"),
        (
            "const c: any = { n: 1 };\nc.self = c;\nreturn { x: { toJSON: () => c } };",
            "a cycle at $.x.self",
        ),
        ("return { get x() { throw new Error('g'); } };", "reading $.x threw Error"),
        (
            "return new Proxy({}, { ownKeys() { throw new Error('keys'); } });",
            "listing the keys at $ threw Error",
        ),
        (
            "(Object.prototype as any).toJSON = () => { throw new RangeError('polluted'); };\n"
            "return {};",
            "toJSON at $ threw RangeError",
        ),
    ],
)
async def test_hostile_results_are_invalid_completions(
    ts: TypeScriptRuntime, program: str, needle: str
) -> None:
    result = await run(ts, program)
    assert result.error is not None and result.error.kind == "invalid_completion", result
    assert needle in result.error.message, result.error.message


async def test_hostile_arguments_fail_the_run_not_the_host(ts: TypeScriptRuntime) -> None:
    result = await run(ts, "await tools.add({ a: { toJSON() { throw new Error('x'); } }, b: 1 });")
    assert result.error is not None and result.error.kind == "invalid_completion"
    assert "the arguments of binding tools.add" in result.error.message
    result = await run(
        ts, "const huge: number[] = [];\nhuge.length = 2 ** 31;\nawait tools.add(huge as any);"
    )
    assert result.error is not None and result.error.kind == "invalid_completion"


async def test_forged_frames_are_dropped_and_counted(ts: TypeScriptRuntime) -> None:
    program = _RAW + (
        "const first = await tools.add({ a: 1, b: 1 });\n"
        'fs.writeSync(1, frame(\'{"type": "Failed", "kind": "parse", "message": "forged"}\'));\n'
        'fs.writeSync(1, frame(\'{"type": "Compiled"}\'));\n'
        'fs.writeSync(1, frame(\'{"type": "Failed", "kind": "budget", "message": "x"}\'));\n'
        'fs.writeSync(1, frame(\'{"type": "Call", "id": 1, "name": "tools.add", "args": {}}\'));\n'
        'fs.writeSync(1, frame(\'{"type": "Call", "id": 999, "name": "constructor", "args": {}}\'));\n'
        "await new Promise((r) => setTimeout(r, 200));\nreturn first;"
    )
    result = await run(ts, program)
    assert result.value == 2, result.error
    assert result.stats is not None
    # a `parse` report from a child whose program the host compiled, a Compiled nobody asked
    # for, a kind only the host decides (undecodable), a repeated call id
    assert result.stats.dropped_frames == 4
    assert result.stats.calls == 2  # the real one, and 999 (answered: no such binding)


async def test_an_oversized_length_swallows_the_report_and_the_run_dies(
    ts: TypeScriptRuntime,
) -> None:
    program = _RAW + (
        "const head = new Uint8Array(4); new DataView(head.buffer).setUint32(0, 2 ** 31);\n"
        "fs.writeSync(1, head);\nreturn 1;"
    )
    result = await run(ts, program)
    assert result.error is not None and result.error.kind == "died"
    assert result.stats is not None and result.stats.dropped_frames == 1


async def test_a_flood_of_garbage_on_the_bridge_ends_at_the_budget(ts: TypeScriptRuntime) -> None:
    program = _RAW + ("const junk = frame('x'.repeat(60000));\nwhile (true) fs.writeSync(1, junk);")
    with anyio.fail_after(30):
        result = await run(ts, program, limits=Limits(compute_ms=500, max_wall_ms=20_000))
    assert result.error is not None and result.error.kind == "budget"
    assert result.stats is not None and result.stats.dropped_frames > 0
    after = await run(ts, "return await tools.add({ a: 1, b: 1 });")
    assert after.value == 2


async def test_a_flood_of_logs_ends_at_the_output_cap(ts: TypeScriptRuntime) -> None:
    program = "const line = 'y'.repeat(100_000);\nwhile (true) console.log(line);"
    result = await run(ts, program, limits=Limits(max_output_bytes=1 << 20))
    assert result.error is not None and result.error.kind == "output_limit"


async def test_closing_its_bridge_kills_only_its_own_run(ts: TypeScriptRuntime) -> None:
    result = await run(ts, "process;\n(await import('node:fs')).closeSync(1);\nreturn 1;")
    assert result.error is not None and result.error.kind == "died"


@pytest.mark.parametrize(
    ("program", "kind", "budget"),
    [
        ("while (true) {}", "budget", "compute"),
        ("for (;;) { Math.sqrt(Math.random()); }", "budget", "compute"),
        ("Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);", "budget", "wall"),
        ("await new Promise(() => {});", "budget", "wall"),
        (
            "process;\nconst { Worker } = await import('node:worker_threads');\n"
            "new Worker('while (true) {}', { eval: true });\nawait new Promise(() => {});",
            "budget",
            "compute",
        ),
    ],
    ids=["while", "for", "atomics-wait", "never-resolved", "worker-thread"],
)
async def test_loops_and_waits_end_at_their_budget(
    ts: TypeScriptRuntime, program: str, kind: str, budget: str
) -> None:
    limits = Limits(compute_ms=300, max_wall_ms=3_000)
    with anyio.fail_after(30):
        result = await run(ts, program, limits=limits)
    assert result.error is not None
    assert (result.error.kind, result.error.budget) == (kind, budget), result.error


@pytest.mark.parametrize(
    ("program", "kinds"),
    [
        ("let s = 'x';\nwhile (true) s += s;", {"exception", "memory"}),
        (
            "const m = new WebAssembly.Memory({ initial: 1, maximum: 65536 });\n"
            "while (true) { m.grow(256); new Uint8Array(m.buffer).fill(1); }",
            {"memory"},
        ),
        (
            "const b: ArrayBuffer[] = [];\nwhile (true) b.push(new ArrayBuffer(1 << 24));",
            {"memory"},
        ),
        ("const o: object[] = [];\nwhile (true) o.push({ a: [1, 2, 3] });", {"memory"}),
    ],
    ids=["string", "wasm-memory", "array-buffers", "heap-objects"],
)
async def test_growths_end_at_the_heap_cap(
    ts: TypeScriptRuntime, program: str, kinds: set[str]
) -> None:
    limits = Limits(max_heap_mb=64, compute_ms=30_000, max_wall_ms=60_000)
    with anyio.fail_after(90):
        result = await run(ts, program, limits=limits)
    assert result.error is not None and result.error.kind in kinds, result.error


async def test_nothing_runs_after_the_program_returned(ts: TypeScriptRuntime) -> None:
    program = (
        "setTimeout(() => console.log('timer'), 0);\n"
        "setInterval(() => console.log('interval'), 1);\n"
        "queueMicrotask(() => console.log('microtask'));\n"
        "addEventListener('unload', () => console.log('unload'));\n"
        "addEventListener('beforeunload', () => console.log('beforeunload'));\n"
        "(globalThis as any).onunload = () => console.log('onunload');\n"
        "process.on('exit', () => console.log('exit'));\n"
        "return 1;"
    )
    result = await run(ts, program)
    assert result.value == 1
    # the microtask queued before `return` runs as the async function settles: it is the
    # program's own; nothing scheduled for later does
    assert result.logs in ([], ["microtask"]), result.logs


async def test_a_thrown_megabyte_is_an_output_limit_at_once(ts: TypeScriptRuntime) -> None:
    program = "const e = new Error('x');\ne.stack = 'y'.repeat(1 << 20);\nthrow e;"
    result = await run(ts, program, limits=Limits(max_output_bytes=100_000))
    assert result.error is not None and result.error.kind == "output_limit"


async def test_the_deno_child_is_contained_as_a_python_child_is(
    ts: TypeScriptRuntime, workdir_root: str
) -> None:
    import os

    from host.sandbox._typescript import _engine_pid

    seen: dict[str, Any] = {}

    async def inspect(args: Any) -> Any:
        (run,) = ts._runs
        assert run.pid is not None
        pid = _engine_pid(run.pid)
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        with open(f"/proc/{pid}/limits") as f:
            seen["data"] = next(line for line in f if line.startswith("Max data size")).split()[3]
        with open(f"/proc/{pid}/environ", "rb") as f:
            seen["environ"] = f.read()
        seen["status"] = status
        seen["exe"] = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        seen["cwd"] = os.readlink(f"/proc/{pid}/cwd")
        seen["fds"] = sorted(
            os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
        )
        return None

    result = await run(ts, "await tools.inspect();\nreturn 1;", bindings={"tools.inspect": inspect})
    assert result.value == 1, result.error
    status = seen["status"]
    assert seen["exe"] == "deno"
    # Deno needs a cache directory named (a run's uid has no home): that one constant is all
    assert seen["environ"] == b"DENO_DIR=/nonexistent/dsh-code-deno\x00"
    assert seen["cwd"].startswith(workdir_root)
    assert status["NoNewPrivs"].strip() == "1"
    assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == 0
    if ts.containment.get("seccomp"):
        assert status["Seccomp"].strip() == "2"
    uid = ts.containment.get("uid")
    if uid is not None:
        assert status["Uid"].split() == [str(uid)] * 4
    assert seen["data"] != "unlimited"  # the heap cap's rlimit, set before Deno started
    # nothing of the host's is open in it: pipes, Deno's own anonymous inodes, /dev/null
    assert all(
        target.startswith(("pipe:", "anon_inode:", "socket:", "/dev/null"))
        for target in seen["fds"]
    ), seen["fds"]


async def test_v8_out_of_memory_is_kind_memory_naming_the_cap(workdir_root: str) -> None:
    # without cgroups only V8's own cap (and the data rlimit) stand: V8 ends the process
    async with TypeScriptRuntime(workdir_root=workdir_root, use_cgroups=False) as ts:
        program = "console.log('growing');\nconst o: object[] = [];\nwhile (true) o.push({ a: [1, 2, 3] });"
        limits = Limits(max_heap_mb=64, compute_ms=30_000, max_wall_ms=60_000)
        with anyio.fail_after(90):
            result = await run(ts, program, limits=limits)
    assert result.error is not None and result.error.kind == "memory", result.error
    assert "max_heap_mb 64" in result.error.message
    assert result.logs == ["growing"]  # V8's own report is not the program's output
