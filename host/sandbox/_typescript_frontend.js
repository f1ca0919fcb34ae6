// dsh-code: the host's TypeScript front end, under Deno with no permissions.
//
// Reads programs on fd 0 (4-byte big-endian length, then the UTF-8 text), answers each on
// fd 1 with one JSON frame: {"js": module text} or {"error", "line", "column"}. A program is
// the body of an async function: it is wrapped as the default export of a module and its
// types stripped (enum and namespace transformed), with an inline source map so a stack in
// the child names the program's own lines. V8 then parses the module (what the child will
// import) so its own syntax errors (a decorator, `with`) are found here too; nothing of the
// program is ever run here (a module parsed by ``vm.SourceTextModule`` is never evaluated).

import { stripTypeScriptTypes } from "node:module";
import { SourceTextModule } from "node:vm";

const PREFIX = "export default async function __dsh_program() {";
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const WHERE = /at file:\/\/\/stripTypeScriptTypes\.ts:(\d+):(\d+)/;

function answer(source) {
  try {
    const js = stripTypeScriptTypes(`${PREFIX}${source}\n}\n`, { mode: "transform", sourceMap: true });
    try {
      new SourceTextModule(js, { identifier: "program" });
    } catch (error) {
      return { error: `${error.name}: ${error.message}`, line: null, column: null };
    }
    return { js };
  } catch (error) {
    const text = String(error && error.message);
    const where = text.match(WHERE);
    const line = where ? Number(where[1]) : 1;
    const column = where ? Number(where[2]) - (line === 1 ? PREFIX.length : 0) : 1;
    const first = text.split("\n")[0].replace(/ at file:\/\/\/stripTypeScriptTypes\.ts:\d+:\d+$/, "");
    return { error: first, line, column };
  }
}

function send(reply) {
  const body = encoder.encode(JSON.stringify(reply));
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length);
  frame.set(body, 4);
  let view = frame;
  while (view.length > 0) view = view.subarray(Deno.stdout.writeSync(view));
}

let pending = new Uint8Array(0);
const buffer = new Uint8Array(1 << 16);
while (true) {
  const n = await Deno.stdin.read(buffer);
  if (n === null) Deno.exit(0); // the host closed its end
  const joined = new Uint8Array(pending.length + n);
  joined.set(pending);
  joined.set(buffer.subarray(0, n), pending.length);
  let at = 0;
  while (joined.length - at >= 4) {
    const size = new DataView(joined.buffer, at, 4).getUint32(0);
    if (joined.length - at - 4 < size) break;
    send(answer(decoder.decode(joined.subarray(at + 4, at + 4 + size))));
    at += 4 + size;
  }
  pending = joined.slice(at);
}
