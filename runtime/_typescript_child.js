// dsh-code: what runs in a TypeScript run's child, under Deno with no permissions.
//
// fd 0 carries the host's frames, fd 1 ours (4-byte big-endian length, then JSON: the
// same tagged messages as runtime/_wire.py), fd 2 is the run's log pipe. We say Ready, wait
// for Start (the program, already type-stripped by the host into a module whose default
// export is the program as an async function body), take `Deno` out of the program's reach,
// run it, report Done or Failed once, and leave at once: no unload handler, timer or promise
// of the program runs after the report. Everything the bridge relies on is captured here,
// before the program exists, so what it does to prototypes cannot reach our frames. The
// child is hostile all the same: the host checks every frame.

import { errorName, NotJson, toJson } from "./_typescript_json.js";

const ReflectApply = Reflect.apply;
const denoNamespace = Deno;
const denoExit = Deno.exit;
const internal = Deno[Deno.internal];
const ConsoleClass = internal.Console;
// core's own read and write on fds 0, 1, 2 (Deno.stdin and friends call through
// Function.prototype.call, which a program may replace)
const core = internal.core;
const coreRead = core.read;
const coreReadSync = core.readSync;
const coreWriteSync = core.writeSync;
const jsonParse = JSON.parse;
const jsonStringify = JSON.stringify;
const { getPrototypeOf, defineProperty, freeze, create: objectCreate } = Object;
const objectKeys = Object.keys;
const objectHasOwn = Object.hasOwn;
const numberIsSafeInteger = Number.isSafeInteger;
const BigIntCtor = BigInt;
const StringCtor = String;
const ErrorCtor = Error;
const captureStackTrace = Error.captureStackTrace;
const PromiseCtor = Promise;
const Uint8ArrayCtor = Uint8Array;
const u8Set = Uint8Array.prototype.set;
const u8Subarray = Uint8Array.prototype.subarray;
const dataViewGetUint32 = DataView.prototype.getUint32;
const DataViewCtor = DataView;
const regExpTest = RegExp.prototype.test;
const stringSplit = String.prototype.split;
const stringSlice = String.prototype.slice;
const stringIndexOf = String.prototype.indexOf;
const arrayJoin = Array.prototype.join;
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const encodeInto = TextEncoder.prototype.encode;
const decodeFrom = TextDecoder.prototype.decode;
const mathMin = Math.min;

const MAX_MESSAGE = 64 * 1024; // a failure report's text never grows past this
const PROGRAM_URL = "file:///stripTypeScriptTypes.ts"; // the name the host's source map gives
// the host's wrapper, on the program's first line (host/sandbox/_typescript_frontend.js)
const PREFIX = "export default async function __dsh_program() {";
const PROGRAM = "<program>";
// what the host's front end makes of `const warm: number = 1; return warm;` (a warm-up)
const WARM_MODULE =
  "ZXhwb3J0IGRlZmF1bHQgYXN5bmMgZnVuY3Rpb24gX19kc2hfcHJvZ3JhbSgpIHsKICBjb25zdCB3YXJtID0gMTsKICByZXR1cm4gd2FybTsKfQovLyMgc291cmNlTWFwcGluZ1VSTD1kYXRhOmFwcGxpY2F0aW9uL2pzb247YmFzZTY0LGV5SjJaWEp6YVc5dUlqb3pMQ0p6YjNWeVkyVnpJanBiSW1acGJHVTZMeTh2YzNSeWFYQlVlWEJsVTJOeWFYQjBWSGx3WlhNdWRITWlYU3dpYzI5MWNtTmxjME52Ym5SbGJuUWlPbHNpWlhod2IzSjBJR1JsWm1GMWJIUWdZWE41Ym1NZ1puVnVZM1JwYjI0Z1gxOWtjMmhmY0hKdlozSmhiU2dwSUh0amIyNXpkQ0IzWVhKdE9pQnVkVzFpWlhJZ1BTQXhPMXh1Y21WMGRYSnVJSGRoY20wN1hHNTlYRzRpWFN3aWJtRnRaWE1pT2x0ZExDSnRZWEJ3YVc1bmN5STZJa0ZCUVVFc1pVRkJaU3hsUVVGbE8wVkJRV2xDTEUxQlFVMHNUMEZCWlR0RlFVTndSU3hQUVVGUE8wRkJRMUFpZlE9PQ==";
const BIG_DIGITS = /\d{16}/;
const INTEGER = /^-?\d+$/;

const call = (fn, self, ...args) => ReflectApply(fn, self, args);
const encode = (text) => call(encodeInto, encoder, text);

// ---- the wire ------------------------------------------------------------------------------

function writeAll(bytes) {
  let view = bytes;
  while (view.length > 0) {
    const n = call(coreWriteSync, core, 1, view);
    view = call(u8Subarray, view, n);
  }
}

/** Send one frame whose JSON body is ``body`` (text we built, never the program's objects). */
function send(body) {
  const bytes = encode(body);
  const frame = new Uint8ArrayCtor(4 + bytes.length);
  new DataViewCtor(frame.buffer).setUint32(0, bytes.length);
  call(u8Set, frame, bytes, 4);
  try {
    writeAll(frame);
  } catch {
    denoExit(0); // the host is gone: nobody left to tell
  }
}

function reviveBig(_key, value, context) {
  if (
    typeof value === "number" &&
    !numberIsSafeInteger(value) &&
    context !== undefined &&
    call(regExpTest, INTEGER, context.source)
  ) {
    return BigIntCtor(context.source);
  }
  return value;
}

/** JSON from the host, integers past 2^53 as bigint (never a rounded number). */
function parseJson(text) {
  return call(regExpTest, BIG_DIGITS, text) ? jsonParse(text, reviveBig) : jsonParse(text);
}

const header = new Uint8ArrayCtor(4);
let headerFill = 0;
let body = null; // the frame being read, made at its full size once its length is known
let bodyFill = 0;
const queued = [];
let queuedHead = 0;
let frameWaiter = null;

/** Take bytes from the host; each frame is copied once, however many reads it spans. */
function feed(chunk) {
  let at = 0;
  while (at < chunk.length) {
    if (body === null) {
      const take = mathMin(4 - headerFill, chunk.length - at);
      call(u8Set, header, call(u8Subarray, chunk, at, at + take), headerFill);
      headerFill += take;
      at += take;
      if (headerFill < 4) return;
      body = new Uint8ArrayCtor(call(dataViewGetUint32, new DataViewCtor(header.buffer), 0));
      bodyFill = 0;
      headerFill = 0;
    }
    const take = mathMin(body.length - bodyFill, chunk.length - at);
    call(u8Set, body, call(u8Subarray, chunk, at, at + take), bodyFill);
    bodyFill += take;
    at += take;
    if (bodyFill === body.length) {
      const text = call(decodeFrom, decoder, body);
      body = null;
      let message;
      try {
        message = parseJson(text);
      } catch {
        continue; // the host sends only JSON; a broken host is not ours to survive
      }
      deliver(message);
    }
  }
}

function deliver(message) {
  if (message === null || typeof message !== "object") return;
  const type = message.type;
  if (type === "Reply" || type === "ReplyError") {
    settleCall(message);
  } else if (frameWaiter !== null) {
    const resolve = frameWaiter;
    frameWaiter = null;
    resolve(message);
  } else {
    queued[queued.length] = message;
  }
}

function nextFrame() {
  if (queuedHead < queued.length) {
    const message = queued[queuedHead];
    queued[queuedHead++] = undefined;
    return PromiseCtor.resolve(message);
  }
  return new PromiseCtor((resolve) => {
    frameWaiter = resolve;
  });
}

async function readLoop() {
  const buffer = new Uint8ArrayCtor(1 << 16);
  while (true) {
    let n;
    try {
      n = await call(coreRead, core, 0, buffer);
    } catch {
      n = null;
    }
    if (n === null || n === 0) denoExit(0); // the host went away: no answer can come
    feed(call(u8Subarray, buffer, 0, n));
  }
}

// ---- reports ---------------------------------------------------------------------------------

let maxOutput = 0;
let heapMb = 0;
let logBytes = 0;
let reported = false;

function leave() {
  denoExit(0);
}

function reportDone(value) {
  if (reported) return;
  if (value === undefined) {
    reported = true;
    send('{"type":"Done","has_value":false,"value":null}');
    leave();
  }
  const room = maxOutput - logBytes;
  const json = toJson(value, room < 0 ? 0 : room, "the result");
  if (json instanceof NotJson) {
    if (json.kind === "output_limit") {
      fail(
        "output_limit",
        `the result's JSON would pass max_output_bytes (${maxOutput}): ${room} bytes were left after the logs`,
      );
    }
    fail(json.kind, json.message);
  }
  if (encode(json).length > room) {
    fail(
      "output_limit",
      `the result's JSON would pass max_output_bytes (${maxOutput}): ${room} bytes were left after the logs`,
    );
  }
  reported = true;
  send(`{"type":"Done","has_value":true,"value":${json}}`);
  leave();
}

function fail(kind, message, exceptionType, traceback, lineno) {
  if (reported) return;
  reported = true;
  const size = message.length + (traceback ? traceback.length : 0) + (exceptionType ? exceptionType.length : 0);
  if (size > maxOutput - logBytes && kind !== "output_limit") {
    const what = exceptionType ? `threw ${exceptionType}` : `failed (${kind})`;
    message =
      `the program ${what}, and the report (${size} characters) would pass ` +
      `max_output_bytes (${maxOutput}) after ${logBytes} bytes of logs`;
    kind = "output_limit";
    exceptionType = traceback = lineno = undefined;
  }
  if (message.length > MAX_MESSAGE) message = call(stringSlice, message, 0, MAX_MESSAGE - 20) + "… [truncated]";
  if (traceback !== undefined && traceback.length > MAX_MESSAGE) {
    traceback = "… [truncated]" + call(stringSlice, traceback, traceback.length - MAX_MESSAGE);
  }
  let body = `{"type":"Failed","kind":${jsonStringify(kind)},"message":${jsonStringify(message)}`;
  if (exceptionType !== undefined) body += `,"exception_type":${jsonStringify(exceptionType)}`;
  if (traceback !== undefined) body += `,"traceback":${jsonStringify(traceback)}`;
  if (lineno !== undefined) body += `,"lineno":${lineno}`;
  send(body + "}");
  leave();
}

const FRAME = /^\s+at (?:(async )?(.*?) \()?(.*?):(\d+):(\d+)\)?$/;

/** The stack of what the program threw, in program lines, without frames of ours. */
function programStack(error, prefix) {
  let stack;
  try {
    stack = error !== null && typeof error === "object" ? error.stack : undefined;
  } catch {
    stack = undefined;
  }
  const name = errorName(error);
  let head;
  try {
    if (typeof stack !== "string") {
      head = `${prefix}${error instanceof ErrorCtor ? name : "Uncaught"}: ${
        typeof error === "string" ? error : internal.inspectArgs([error])
      }`;
      return { text: head, lineno: undefined };
    }
  } catch {
    return { text: `${prefix}${name}: <the thrown value could not be shown>`, lineno: undefined };
  }
  const lines = call(stringSplit, stack, "\n");
  const kept = [];
  let lineno;
  let inFrames = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const frame = call(regExpTest, /^\s+at /, line) ? line.match(FRAME) : null;
    if (!frame) {
      if (!inFrames) kept[kept.length] = line;
      continue;
    }
    inFrames = true;
    const [, isAsync, fn, file, row, column] = frame;
    if (file !== PROGRAM_URL) continue; // Deno's own frames and ours
    let col = Number(column);
    if (row === "1") col -= PREFIX.length;
    const where = `${PROGRAM}:${row}:${col}`;
    const fnName = fn === undefined || fn === "Module.__dsh_program" ? "" : fn;
    kept[kept.length] = fnName ? `    at ${isAsync || ""}${fnName} (${where})` : `    at ${where}`;
    if (lineno === undefined) lineno = Number(row);
  }
  return { text: prefix + call(arrayJoin, kept, "\n"), lineno };
}

function reportException(error, prefix = "") {
  if (reported) return;
  const name = errorName(error);
  let message = "";
  try {
    message = error !== null && typeof error === "object" ? StringCtor(error.message) : "";
  } catch {
    // a throwing getter: the stack says what it can
  }
  if (
    name === "RangeError" &&
    (message === "Array buffer allocation failed" ||
      call(stringIndexOf, message, "Out of memory") >= 0 ||
      call(stringIndexOf, message, "Unable to grow instance memory") >= 0)
  ) {
    fail("memory", `${name}: ${message}: the program passed the heap cap (max_heap_mb ${heapMb})`);
  }
  const { text, lineno } = programStack(error, prefix);
  fail("exception", text, name, text, lineno);
}

// ---- logs ------------------------------------------------------------------------------------

function writeLog(text) {
  const bytes = encode(text);
  logBytes += bytes.length;
  let view = bytes;
  while (view.length > 0) {
    view = call(u8Subarray, view, call(coreWriteSync, core, 2, view));
  }
}

const programConsole = new ConsoleClass((message) => writeLog(message));

// ---- bindings --------------------------------------------------------------------------------

const calls = objectCreate(null);
let nextCallId = 0;

class ToolCallError extends Error {
  constructor(tool, message, code) {
    super(message);
    defineProperty(this, "name", { __proto__: null, value: "ToolCallError", writable: true, configurable: true });
    defineProperty(this, "tool", { __proto__: null, value: tool, enumerable: true });
    defineProperty(this, "code", { __proto__: null, value: code, enumerable: true });
  }
}

function settleCall(message) {
  const id = message.id;
  if (typeof id !== "number") return;
  const waiter = calls[id];
  if (waiter === undefined) return;
  calls[id] = undefined;
  if (message.type === "Reply") {
    waiter.resolve(message.value);
    return;
  }
  const error = new ToolCallError(StringCtor(message.tool), StringCtor(message.message), StringCtor(message.code));
  // where the program made the call, not where we read the reply: its frames are the program's
  const site = waiter.site.stack;
  const frames = typeof site === "string" ? call(stringIndexOf, site, "\n") : -1;
  if (frames >= 0) {
    defineProperty(error, "stack", {
    __proto__: null,
      value: `ToolCallError: ${error.message}${call(stringSlice, site, frames)}`,
      writable: true,
      configurable: true,
    });
  }
  waiter.reject(error);
}

function makeBinding(name) {
  const binding = (...args) => {
    if (args.length > 1) {
      return PromiseCtor.reject(new TypeError(`${name}() takes one object of arguments`));
    }
    const json = toJson(args.length === 0 ? {} : args[0], 1 << 30, `the arguments of binding ${name}`);
    if (json instanceof NotJson) {
      const why = json.kind === "output_limit" ? `the arguments of binding ${name} are too large: ${json.message}` : json.message;
      fail("invalid_completion", why);
    }
    const id = ++nextCallId;
    const site = {};
    captureStackTrace(site, binding);
    const promise = new PromiseCtor((resolve, reject) => {
      calls[id] = { resolve, reject, site };
    });
    send(`{"type":"Call","id":${id},"name":${jsonStringify(name)},"args":${json}}`);
    return promise;
  };
  defineProperty(binding, "name", { __proto__: null, value: name });
  return binding;
}

function installBindings(names) {
  for (let i = 0; i < names.length; i++) {
    const parts = call(stringSplit, names[i], ".");
    let holder = globalThis;
    for (let j = 0; j < parts.length - 1; j++) {
      const part = parts[j];
      let next = objectHasOwn(holder, part) ? holder[part] : undefined;
      if (next === undefined || next === null || getPrototypeOf(next) !== null) {
        next = objectCreate(null);
        defineProperty(holder, part, { __proto__: null, value: next, writable: holder === globalThis, enumerable: true, configurable: holder === globalThis });
      }
      holder = next;
    }
    defineProperty(holder, parts[parts.length - 1], {
    __proto__: null,
      value: makeBinding(names[i]),
      writable: holder === globalThis,
      enumerable: true,
      configurable: holder === globalThis,
    });
  }
  // a namespace holds its bindings as own properties only, and no program can add or swap one
  for (let i = 0; i < names.length; i++) {
    const root = call(stringSplit, names[i], ".")[0];
    if (names[i] !== root) deepFreeze(globalThis[root]);
  }
}

function deepFreeze(namespace) {
  if (namespace === null || typeof namespace !== "object") return;
  const names = objectKeys(namespace);
  for (let i = 0; i < names.length; i++) deepFreeze(namespace[names[i]]);
  freeze(namespace);
}

// ---- the program's world ---------------------------------------------------------------------

function refuseWorkers() {
  class Worker {
    constructor() {
      throw new TypeError("Workers are not available to programs: run the work in this program");
    }
  }
  defineProperty(globalThis, "Worker", { __proto__: null, value: Worker, writable: true, configurable: true });
}

function logStreams(process) {
  // ending the process is Deno's to refuse (it is gone): say it in words a program can act on
  defineProperty(process, "exit", {
    __proto__: null,
    value: (code) => {
      throw new TypeError(`process.exit(${code ?? ""}) is not available to programs: return a value, or throw`);
    },
    writable: true,
    configurable: true,
  });
  for (const stream of [process.stdout, process.stderr]) {
    defineProperty(stream, "write", {
    __proto__: null,
      value: (chunk, encoding, callback) => {
        writeLog(typeof chunk === "string" ? chunk : call(decodeFrom, decoder, chunk));
        if (typeof encoding === "function") encoding();
        else if (typeof callback === "function") callback();
        return true;
      },
      writable: true,
      configurable: true,
    });
  }
}

let lending = 0;

function lendDeno(name) {
  const getter = Object.getOwnPropertyDescriptor(globalThis, name)?.get;
  if (getter === undefined) return;
  let made = false;
  let value;
  defineProperty(globalThis, name, {
    __proto__: null,
    get() {
      if (made) return value;
      if (lending++ === 0) defineProperty(globalThis, "Deno", { __proto__: null, value: denoNamespace, configurable: true });
      try {
        value = ReflectApply(getter, globalThis, []);
        if (name === "process") logStreams(value);
        made = true;
      } finally {
        if (--lending === 0) delete globalThis.Deno;
      }
      return value;
    },
    set(replaced) {
      defineProperty(globalThis, name, { __proto__: null, value: replaced, writable: true, enumerable: true, configurable: true });
    },
    enumerable: true,
    configurable: true,
  });
}

function contain() {
  // Deno's core makes every async op (our reads of fd 0 among them) through
  // Function.prototype.call: a program that replaced it would cut the bridge
  for (const name of ["call", "apply", "bind"]) {
    defineProperty(Function.prototype, name, { __proto__: null, writable: false, configurable: false });
  }
  // an unload handler would run after the report: Deno.exit dispatches "unload" unless told
  // it has been already; said here for good, so the program cannot unsay it
  defineProperty(globalThis, Symbol.for("Deno.isUnloadDispatched"), { __proto__: null, value: true });
  globalThis.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
    reportException(event.reason, "Uncaught (in promise) ");
  });
  globalThis.addEventListener("error", (event) => {
    event.preventDefault();
    reportException(event.error);
  });
  // node's globals are made on first use (its process costs ~10 ms or more), from Deno's
  // namespace, which the program no longer has: lend it back for that moment only
  for (const name of ["process", "Buffer", "setImmediate", "clearImmediate"]) lendDeno(name);
  defineProperty(globalThis, "console", { __proto__: null, value: programConsole, writable: true, configurable: true });
  refuseWorkers();
  delete globalThis.Deno;
}

// Before the program exists (a spare has the time): walk the paths a run takes once, so
// their first-time costs (the module loader, source maps: ~6 ms) are not the program's,
// and close the world it will run in.
toJson({ a: [1, 2.5, null, "x", { b: true }], n: 10n }, 1 << 20, "the warm-up");
parseJson('{"type":"Reply","id":1,"value":{"n":12345678901234567890,"s":"x"}}');
await import(`data:text/javascript;base64,${WARM_MODULE}`);
contain();
send('{"type":"Ready"}');
// A spare has nothing else to do until its program comes: wait for it in a plain read on
// this thread (an async read would wake a helper thread first, ~0.5 ms of every run).
{
  const buffer = new Uint8ArrayCtor(1 << 16);
  while (queuedHead >= queued.length) {
    let n;
    try {
      n = call(coreReadSync, core, 0, buffer);
    } catch {
      n = null;
    }
    if (n === null || n === 0) denoExit(0); // the host went away before the program came
    feed(call(u8Subarray, buffer, 0, n));
  }
}
readLoop();
const start = await nextFrame();
if (start.type !== "Start") denoExit(3);
maxOutput = start.max_output_bytes;
heapMb = start.heap_bytes / (1024 * 1024);
const inputs = start.inputs;
const inputNames = objectKeys(inputs);
for (let i = 0; i < inputNames.length; i++) {
  defineProperty(globalThis, inputNames[i], {
    __proto__: null,
    value: inputs[inputNames[i]],
    writable: true,
    enumerable: true,
    configurable: true,
  });
}
installBindings(start.bindings);
defineProperty(globalThis, "ToolCallError", { __proto__: null, value: ToolCallError, writable: true, configurable: true });
let value;
try {
  const program = await import(`data:text/javascript;base64,${start.code}`);
  value = typeof program.default === "function" ? await program.default() : undefined;
} catch (error) {
  reportException(error);
}
reportDone(value);
