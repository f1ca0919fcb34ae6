// dsh-code: the lossless-JSON rule of runtime/_json.py, for a TypeScript child's results and
// binding arguments: what is not JSON, and where ($.items[3]), never silently converted.
// Its intrinsics are captured when the child's bootstrap loads it, before any program exists.

const ReflectApply = Reflect.apply;
const jsonStringify = JSON.stringify;
const { getPrototypeOf } = Object;
const objectKeys = Object.keys;
const objectHasOwn = Object.hasOwn;
const isArray = Array.isArray;
const ObjectPrototype = Object.prototype;
const numberIsFinite = Number.isFinite;
const numberIsSafeInteger = Number.isSafeInteger;
const numberIsInteger = Number.isInteger;
const BigIntCtor = BigInt;
const StringCtor = String;
const stringIsWellFormed = String.prototype.isWellFormed;
const regExpTest = RegExp.prototype.test;
const stringSlice = String.prototype.slice;
const arrayJoin = Array.prototype.join;
const SetCtor = Set;
const setHas = Set.prototype.has;
const setAdd = Set.prototype.add;
const setDelete = Set.prototype.delete;
const setSize = Object.getOwnPropertyDescriptor(Set.prototype, "size").get;

const MAX_DEPTH = 500; // runtime/_json.py's: deeper values cannot cross the pipe
const MAX_INT_DIGITS = 4300; // a default Python cannot read a longer integer
const MAX_TYPE_NAME = 200;

const call = (fn, self, ...args) => ReflectApply(fn, self, args);

/** An error's name (cut), for messages; never the program's code running wild. */
export function errorName(error) {
  try {
    if (error !== null && typeof error === "object") {
      const name = error.name;
      if (typeof name === "string" && name) return call(stringSlice, name, 0, MAX_TYPE_NAME);
    }
  } catch {
    // its name getter threw
  }
  return error === null ? "null" : typeof error;
}

export class NotJson {
  constructor(kind, message) {
    this.kind = kind;
    this.message = message;
  }
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function pathText(path) {
  let text = "$";
  for (let i = 0; i < path.length; i++) {
    const step = path[i];
    if (typeof step === "number") text += `[${step}]`;
    else if (call(regExpTest, IDENTIFIER, step)) text += `.${step}`;
    else text += `[${jsonStringify(step)}]`;
  }
  return text.length <= 200
    ? text
    : call(stringSlice, text, 0, 97) + "…" + call(stringSlice, text, text.length - 100);
}

/** What ``value`` is, where it is, and what to do: "a Map at $.m (only plain ...)". */
function describeAt(value, path) {
  const where = pathText(path);
  if (value === undefined) return `undefined at ${where}`;
  if (typeof value === "function") return `a function at ${where}`;
  if (typeof value === "symbol") return `a symbol at ${where}`;
  if (typeof value === "number") return `the number ${StringCtor(value)} at ${where}`;
  let name = "an object";
  let thenable = false;
  try {
    const proto = getPrototypeOf(value);
    const ctor = proto && objectHasOwn(proto, "constructor") ? proto.constructor : undefined;
    if (typeof ctor === "function" && typeof ctor.name === "string" && ctor.name) {
      name = `a ${call(stringSlice, ctor.name, 0, MAX_TYPE_NAME)}`;
    }
    thenable = typeof value.then === "function";
  } catch {
    // a Proxy's trap threw: "an object" says enough
  }
  if (thenable) return `${name} at ${where} (a Promise: did you forget await?)`;
  return `${name} at ${where} (only plain objects and arrays are JSON)`;
}

/**
 * The JSON text of ``value`` if it is lossless JSON within ``room`` bytes (UTF-16 units, a
 * lower bound of its bytes); else a NotJson saying what and where. A ``toJSON`` method is
 * honoured as JSON.stringify honours it; a getter or trap that throws is a problem.
 */
export function toJson(value, room, what) {
  const path = [];
  const onPath = new SetCtor();
  let size = 0;
  const add = (text) => {
    size += text.length;
    if (size > room) throw new NotJson("output_limit", `more than ${room} bytes as JSON`);
    return text;
  };
  const fail = (problem) => {
    throw new NotJson("invalid_completion", `${what} is not lossless JSON: ${problem}`);
  };
  const walk = (item, key) => {
    if (item !== null && (typeof item === "object" || typeof item === "bigint")) {
      let toJSON;
      try {
        toJSON = item.toJSON;
      } catch (error) {
        fail(`reading toJSON at ${pathText(path)} threw ${errorName(error)}`);
      }
      if (typeof toJSON === "function") {
        try {
          item = ReflectApply(toJSON, item, [key]);
        } catch (error) {
          fail(`its toJSON at ${pathText(path)} threw ${errorName(error)}`);
        }
      }
    }
    switch (typeof item) {
      case "string":
        if (!call(stringIsWellFormed, item)) fail(`a string with a lone surrogate at ${pathText(path)}`);
        return add(jsonStringify(item));
      case "number":
        if (!numberIsFinite(item)) fail(describeAt(item, path));
        // past 2^53 a number's shortest text is not its value (2 ** 60 prints 1152921504606847000):
        // the exact integer it is goes out instead
        if (!numberIsSafeInteger(item) && numberIsInteger(item)) return add(StringCtor(BigIntCtor(item)));
        return add(jsonStringify(item));
      case "boolean":
        return add(item ? "true" : "false");
      case "bigint": {
        const digits = StringCtor(item);
        if (digits.length - (item < 0n ? 1 : 0) > MAX_INT_DIGITS) {
          fail(`an integer of more than ${MAX_INT_DIGITS} digits at ${pathText(path)}`);
        }
        return add(digits);
      }
      case "object":
        if (item === null) return add("null");
        break;
      default:
        fail(describeAt(item, path));
    }
    if (call(setHas, onPath, item)) fail(`a cycle at ${pathText(path)} (the value contains itself)`);
    if (call(setSize, onPath) >= MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH} levels at ${pathText(path)}`);
    let array;
    try {
      array = isArray(item);
    } catch (error) {
      fail(`${errorName(error)} at ${pathText(path)}`);
    }
    let proto;
    if (!array) {
      try {
        proto = getPrototypeOf(item);
      } catch (error) {
        fail(`${errorName(error)} at ${pathText(path)}`);
      }
      if (proto !== ObjectPrototype && proto !== null) fail(describeAt(item, path));
    }
    call(setAdd, onPath, item);
    const parts = [];
    try {
      if (array) {
        let length;
        try {
          length = item.length;
        } catch (error) {
          fail(`reading the length at ${pathText(path)} threw ${errorName(error)}`);
        }
        add("[]");
        if (typeof length !== "number" || !(length >= 0)) fail(`an array whose length is not a number at ${pathText(path)}`);
        // each element takes a byte at least: a length past the room is too large, unread
        if (length > room - size) throw new NotJson("output_limit", `more than ${room} bytes as JSON`);
        for (let i = 0; i < length; i++) {
          if (i > 0) add(",");
          path[path.length] = i;
          let child;
          try {
            child = item[i];
          } catch (error) {
            fail(`reading ${pathText(path)} threw ${errorName(error)}`);
          }
          parts[i] = walk(child, StringCtor(i));
          path.length -= 1;
        }
        return `[${call(arrayJoin, parts, ",")}]`;
      }
      let names;
      try {
        names = objectKeys(item);
      } catch (error) {
        fail(`listing the keys at ${pathText(path)} threw ${errorName(error)}`);
      }
      add("{}");
      for (let i = 0; i < names.length; i++) {
        const name = names[i];
        path[path.length] = name;
        if (!call(stringIsWellFormed, name)) fail(`a key with a lone surrogate at ${pathText(path)}`);
        let child;
        try {
          child = item[name];
        } catch (error) {
          fail(`reading ${pathText(path)} threw ${errorName(error)}`);
        }
        const quoted = jsonStringify(name);
        add(quoted);
        add(i > 0 ? ":," : ":");
        parts[i] = `${quoted}:${walk(child, name)}`;
        path.length -= 1;
      }
      return `{${call(arrayJoin, parts, ",")}}`;
    } finally {
      call(setDelete, onPath, item);
    }
  };
  try {
    return walk(value, "");
  } catch (error) {
    if (error instanceof NotJson) return error;
    if (error instanceof RangeError) return new NotJson("invalid_completion", `${what} is nested too deep to be checked`);
    throw error;
  }
}
