"""The restricted policy's tables: what a program may import, read and call, and the hints."""

from __future__ import annotations

import asyncio
import collections
import string
import types
from collections.abc import Iterable

from RestrictedPython.transformer import INSPECT_ATTRIBUTES

__all__ = (
    "ALLOWED_MODULES",
    "ATTRIBUTE_HINT",
    "DENIED_ATTRIBUTES",
    "DENIED_BUILTINS",
    "FORMATTERS",
    "FORMAT_METHODS",
    "HIDDEN_TYPES",
    "MAGIC_METHODS",
    "NODE_HINTS",
    "PROGRAM_MODULE",
    "PolicyViolation",
    "import_hint",
    "module_allows",
    "names",
)

#: ``__name__`` of a restricted program: what its classes and functions get as ``__module__``.
PROGRAM_MODULE = "__program__"


class PolicyViolation(Exception):
    """The program breaks the policy; ``.messages``: model-actionable reasons, with line numbers."""

    messages: tuple[str, ...]

    def __init__(self, messages: Iterable[str], filename: str = "<program>") -> None:
        self.messages = tuple(messages)
        self.filename = filename
        super().__init__(f"{filename}: " + "; ".join(self.messages))


# -- what a program may import, and which attributes of each module it may read ----------------
# "*" means every public name, "-x" then takes x out; otherwise the words are the allow-list.
# Whatever the list says, a module attribute whose value is a module outside this table, a frame,
# a code object, a traceback or an event loop is refused (see _check_hidden): that is what stops
# walks such as ``datetime.sys`` or ``fractions.os``.
_MODULE_SPECS: dict[str, str] = {
    "asyncio": "ALL_COMPLETED FIRST_COMPLETED FIRST_EXCEPTION Barrier BoundedSemaphore "
    "CancelledError Condition Event Future InvalidStateError LifoQueue Lock PriorityQueue Queue "
    "QueueEmpty QueueFull Semaphore Task TaskGroup Timeout TimeoutError as_completed create_task "
    "ensure_future gather iscoroutine iscoroutinefunction shield sleep timeout timeout_at wait "
    "wait_for",
    "base64": "*",
    "bisect": "*",
    "collections": "*",
    "collections.abc": "*",
    "contextlib": "AsyncExitStack ExitStack aclosing asynccontextmanager closing contextmanager "
    "nullcontext suppress",
    "copy": "*",
    "dataclasses": "FrozenInstanceError InitVar KW_ONLY MISSING asdict astuple dataclass field "
    "fields is_dataclass replace",
    "datetime": "*",
    "decimal": "*",
    "enum": "Enum Flag IntEnum IntFlag StrEnum auto unique",
    "fractions": "*",
    # singledispatch evaluates string annotations with eval(): unrestricted code; wraps and
    # update_wrapper write __dict__ and __module__ of any object, past the write guard.
    "functools": "cache cached_property cmp_to_key lru_cache partial reduce total_ordering",
    "hashlib": "blake2b blake2s md5 new sha1 sha224 sha256 sha384 sha3_256 sha3_512 sha512",
    "heapq": "*",
    "itertools": "*",
    "json": "JSONDecodeError dumps loads",
    "math": "*",
    # attrgetter and methodcaller read attributes without _getattr_.
    "operator": "* -attrgetter -methodcaller",
    "pprint": "pformat pprint",
    "random": "*",
    "re": "*",
    "statistics": "*",
    # Formatter walks attributes named in a format string ("{0.__class__}").
    "string": "* -Formatter",
    "textwrap": "*",
    "time": "gmtime localtime monotonic perf_counter sleep strftime time",
    # get_type_hints and ForwardRef evaluate strings with eval(): unrestricted code.
    "typing": "Any AsyncIterator Awaitable Callable ClassVar Coroutine Dict Final FrozenSet "
    "Generic Iterable Iterator List Literal Mapping NamedTuple NotRequired Optional Protocol "
    "Required Sequence Set Tuple TypeVar TypedDict Union cast",
    "urllib": "parse",
    "urllib.parse": "*",
    # uuid1 and getnode may run a subprocess to find a MAC address.
    "uuid": "NAMESPACE_DNS NAMESPACE_OID NAMESPACE_URL NAMESPACE_X500 UUID uuid3 uuid4 uuid5",
}


def names(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _parse_spec(spec: str) -> tuple[bool, frozenset[str]]:
    words = spec.split()
    if words[:1] == ["*"]:
        return False, frozenset(word.removeprefix("-") for word in words[1:])
    return True, frozenset(words)


#: module -> (exhaustive, names): the allow-list when exhaustive, else the public names left out.
ALLOWED_MODULES: dict[str, tuple[bool, frozenset[str]]] = {
    module: _parse_spec(spec) for module, spec in _MODULE_SPECS.items()
}

# Attributes refused on every object, on top of RestrictedPython's frame/code/traceback names:
# they hand out the event loop (subprocess_exec, sockets) or the runtime's coroutines and frames.
DENIED_ATTRIBUTES = INSPECT_ATTRIBUTES | {"get_loop", "get_coro", "get_stack", "print_stack"}
FORMAT_METHODS = frozenset({"format", "format_map", "vformat", "get_field", "get_value"})
FORMATTERS = (str, collections.UserString, string.Formatter)
HIDDEN_TYPES: tuple[type, ...] = (types.ModuleType, types.FrameType, types.CodeType)
HIDDEN_TYPES += (types.TracebackType, asyncio.AbstractEventLoop)

# Data-model methods a program's classes may define (RestrictedPython allows only __init__ and
# comparisons); `super().<name>` may reach the same names.
MAGIC_METHODS = names(
    "__init__ __post_init__ __repr__ __str__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ "
    "__bool__ __len__ __contains__ __iter__ __next__ __aiter__ __anext__ __getitem__ __setitem__ "
    "__delitem__ __enter__ __exit__ __aenter__ __aexit__ __call__ __add__ __sub__ __mul__ "
    "__truediv__ __floordiv__ __mod__ __neg__ __abs__ __radd__ __rsub__ __rmul__"
)

# Builtins a program does not get, with what to do instead.
DENIED_BUILTINS: dict[str, str] = {
    "open": "there is no file access in a program; read and write files through the tools provided",
    "exec": "code cannot be built at run time; write the code directly in the program",
    "eval": "code cannot be built at run time; write the expression directly, or use json.loads "
    "for data",
    "compile": "code cannot be built at run time; write the code directly in the program",
    "globals": "refer to variables by name, or keep values in a dict keyed by name",
    "locals": "refer to variables by name, or keep values in a dict keyed by name",
    "vars": "refer to attributes by name, or use dataclasses.asdict() for a dataclass",
    "dir": "use the attributes you know, or hasattr(obj, name)",
    "input": "a program has no stdin; its data comes from its inputs and from tools",
    "breakpoint": "debuggers are not available; print() the values you want to see",
    "help": "help() is not available; print() values to inspect them",
    "exit": "end the program with `return <value>` or raise an exception",
    "quit": "end the program with `return <value>` or raise an exception",
    "memoryview": "use bytes or bytearray",
}

NODE_HINTS: dict[str, str] = {
    "Match": "use if/elif with isinstance() and dict or attribute access",
    "TryStar": "use `except ExceptionGroup as eg:` and look at eg.exceptions",
}

ATTRIBUTE_HINT = (
    "dunder and private attributes are not available in the restricted policy; use builtins "
    "(type(x), isinstance(x, T), len(x)) or public methods instead"
)


def module_allows(module: str, name: str) -> bool:
    entry = ALLOWED_MODULES.get(module)
    if entry is None or name.startswith("_"):
        return False
    exhaustive, names = entry
    return (name in names) if exhaustive else (name not in names)


def import_hint() -> str:
    return "importable modules: " + ", ".join(sorted(ALLOWED_MODULES))
