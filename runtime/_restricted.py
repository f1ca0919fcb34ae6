"""The restricted policy: RestrictedPython extended to async programs, with guarded globals."""

from __future__ import annotations

import ast
import asyncio
import builtins
import collections
import operator
import string
import sys
import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any, cast

from RestrictedPython.transformer import (
    INSPECT_ATTRIBUTES,
    IOPERATOR_TO_STR,
    RestrictingNodeTransformer,
    copy_locations,
)

__all__ = (
    "ALLOWED_MODULES",
    "PROGRAM_MODULE",
    "AccessDenied",
    "PolicyViolation",
    "restrict",
    "restricted_globals",
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


def _names(text: str) -> frozenset[str]:
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
_DENIED_ATTRIBUTES = INSPECT_ATTRIBUTES | {"get_loop", "get_coro", "get_stack", "print_stack"}
_FORMAT_METHODS = frozenset({"format", "format_map", "vformat", "get_field", "get_value"})
_FORMATTERS = (str, collections.UserString, string.Formatter)
_HIDDEN_TYPES: tuple[type, ...] = (types.ModuleType, types.FrameType, types.CodeType)
_HIDDEN_TYPES += (types.TracebackType, asyncio.AbstractEventLoop)

# Data-model methods a program's classes may define (RestrictedPython allows only __init__ and
# comparisons); `super().<name>` may reach the same names.
_MAGIC_METHODS = _names(
    "__init__ __post_init__ __repr__ __str__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ "
    "__bool__ __len__ __contains__ __iter__ __next__ __aiter__ __anext__ __getitem__ __setitem__ "
    "__delitem__ __enter__ __exit__ __aenter__ __aexit__ __call__ __add__ __sub__ __mul__ "
    "__truediv__ __floordiv__ __mod__ __neg__ __abs__ __radd__ __rsub__ __rmul__"
)

# Builtins a program does not get, with what to do instead.
_DENIED_BUILTINS: dict[str, str] = {
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

_NODE_HINTS: dict[str, str] = {
    "Match": "use if/elif with isinstance() and dict or attribute access",
    "TryStar": "use `except ExceptionGroup as eg:` and look at eg.exceptions",
}

_ATTRIBUTE_HINT = (
    "dunder and private attributes are not available in the restricted policy; use builtins "
    "(type(x), isinstance(x, T), len(x)) or public methods instead"
)


def _module_allows(module: str, name: str) -> bool:
    entry = ALLOWED_MODULES.get(module)
    if entry is None or name.startswith("_"):
        return False
    exhaustive, names = entry
    return (name in names) if exhaustive else (name not in names)


def _import_hint() -> str:
    return "importable modules: " + ", ".join(sorted(ALLOWED_MODULES))


# -- the transformer ---------------------------------------------------------------------------


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the program binds anywhere (so shadowing a denied builtin stays legal)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _is_super_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _call(name: str, args: list[ast.expr], where: ast.AST) -> ast.Call:
    call = ast.Call(func=_load(name), args=args, keywords=[])
    ast.copy_location(call, where)
    return ast.fix_missing_locations(call)


class _AsyncPolicy(RestrictingNodeTransformer):
    """RestrictedPython's checks, extended to async code, augmented assignment and dataclasses."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(errors, [], {})
        self.denied_loads: list[ast.Name] = []

    # Messages: line first, what is refused, what to do instead.

    def error(self, node: ast.AST, info: str) -> None:
        lineno = getattr(node, "lineno", None)
        where = f"line {lineno}" if lineno else "program"
        if "attribute name because it starts" in info:
            info = f"{info.rstrip('.')}: {_ATTRIBUTE_HINT}"
        elif "forbidden to access in RestrictedPython" in info:
            info = (
                f"{info.split(' is ')[0]} is not available: frames, code objects and tracebacks "
                "are hidden in the restricted policy; await coroutines instead of inspecting them"
            )
        elif '"*" imports' in info:
            info = "`import *` is not allowed; import the names you need explicitly"
        elif "metaclass" in info:
            info = "the `metaclass` keyword is not allowed; use a plain class or a dataclass"
        self.errors.append(f"{where}: {info}")

    def not_allowed(self, node: ast.AST) -> None:
        kind = type(node).__name__
        hint = _NODE_HINTS.get(kind, "rewrite it with plain statements")
        self.error(node, f"`{kind}` statements are not allowed in the restricted policy; {hint}")

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None or name == "_":
            return
        if name.startswith("_"):
            if allow_magic_methods and name in _MAGIC_METHODS and node.col_offset != 0:
                return
            self.error(
                node,
                f'"{name}" is not allowed as a name: names starting with "_" are reserved for '
                "the runtime; rename it without the leading underscore",
            )
        elif name.endswith("__roles__") or name in ("builtins", "breakpoint"):
            self.error(node, f'"{name}" is a reserved name; choose another name')

    # Names and calls: print stays the builtin (RestrictedPython would collect it in `printed`).

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _DENIED_BUILTINS and isinstance(node.ctx, ast.Load):
            self.denied_loads.append(node)  # judged once the whole program is seen
        self.check_name(node, node.id)
        return node

    def check_denied_loads(self, tree: ast.AST) -> None:
        """A denied builtin is an error unless the program binds that name itself somewhere."""
        bound = _bound_names(tree) if self.denied_loads else set()
        for node in self.denied_loads:
            if node.id not in bound:
                hint = _DENIED_BUILTINS[node.id]
                self.error(node, f"`{node.id}` is not available in the restricted policy; {hint}")

    def visit_Call(self, node: ast.Call) -> ast.AST:
        # RestrictingNodeTransformer.visit_Call minus its exec/eval check (visit_Name covers it).
        wrap = any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        )
        node = self.node_contents_visit(node)
        if wrap:
            node.args.insert(0, node.func)
            node.func = ast.Name("_apply_", ast.Load())
            copy_locations(node.func, node.args[0])
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if (
            node.attr in _MAGIC_METHODS
            and isinstance(node.ctx, ast.Load)
            and _is_super_call(node.value)
        ):
            # super().__init__(...) and friends: _getattr_ lets these names through on super only.
            value = self.visit(node.value)
            return _call("_getattr_", [value, ast.Constant(node.attr)], node)
        return cast(ast.AST, super().visit_Attribute(node))

    # Imports: refused here with a reason, and again at run time by the guarded __import__.

    def _check_module(self, node: ast.stmt, module: str) -> None:
        if module not in ALLOWED_MODULES:
            self.error(
                node,
                f"`{module}` cannot be imported in the restricted policy: a program cannot reach "
                f"the operating system, the interpreter or the network except through its tools; "
                f"{_import_hint()}",
            )

    def visit_Import(self, node: ast.Import) -> ast.AST:
        for alias in node.names:
            self._check_module(node, alias.name)
        result: ast.AST = self.check_import_names(node)
        return result

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        module = node.module or ""
        if node.level:
            self.error(node, "relative imports are not allowed; import a module by its full name")
        else:
            self._check_module(node, module)
            for alias in node.names:
                full = f"{module}.{alias.name}"
                allowed = full in ALLOWED_MODULES or _module_allows(module, alias.name)
                if module in ALLOWED_MODULES and alias.name != "*" and not allowed:
                    self.error(
                        node,
                        f"`{alias.name}` cannot be imported from `{module}` in the restricted "
                        "policy; use another name from that module",
                    )
        result: ast.AST = self.check_import_names(node)
        return result

    # Statements RestrictedPython refuses or does not know.

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST | list[ast.stmt]:
        """``obj.a += v``, ``d[k] += v``: evaluate obj (and k) once, then guarded read and write."""
        target = node.target
        if isinstance(target, ast.Name):
            # Kept native (RestrictedPython calls _inplacevar_): an operator on values the program
            # already holds crosses no boundary, and `total += x` is the hottest line of a loop.
            return self.node_contents_visit(node)
        op = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
        obj = self.gen_tmp_name()
        stmts: list[ast.stmt] = [ast.Assign([ast.Name(obj, ast.Store())], self.visit(target.value))]
        if isinstance(target, ast.Attribute):
            if target.attr.startswith("_") or target.attr in _DENIED_ATTRIBUTES:
                self.error(node, f'"{target.attr}" cannot be assigned: {_ATTRIBUTE_HINT}')
            read = _call("_getattr_", [_load(obj), ast.Constant(target.attr)], node)
            write = _call("_write_", [_load(obj)], node)
            store: ast.expr = ast.Attribute(write, target.attr, ast.Store())
        else:
            key = self.gen_tmp_name()
            stmts.append(ast.Assign([ast.Name(key, ast.Store())], self.visit(target.slice)))
            read = _call("_getitem_", [_load(obj), _load(key)], node)
            write = _call("_write_", [_load(obj)], node)
            store = ast.Subscript(write, _load(key), ast.Store())
        value = _call("_inplacevar_", [op, read, self.visit(node.value)], node)
        stmts.append(ast.Assign(targets=[store], value=value))
        for stmt in stmts:
            ast.copy_location(stmt, node)
            ast.fix_missing_locations(stmt)
        return stmts

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        # Annotations are ordinary guarded expressions; dataclasses need them in class bodies.
        result: ast.AST = self.node_contents_visit(node)
        return result

    def visit_TryStar(self, node: ast.AST) -> None:
        self.not_allowed(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        # Safe: the names are checked, and every assignment to them is checked again.
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        if any(k.arg is None for k in node.keywords):
            # class A(**{"metaclass": M}) would smuggle in the keyword refused below.
            self.error(node, "`**` in a class statement is not allowed; pass keywords by name")
        new = cast(ast.ClassDef, super().visit_ClassDef(node))
        # RestrictedPython rebuilds the class from a template parsed at line 1 and drops the
        # class keywords (TypedDict's total=...): give back the program's line and keywords.
        for part in (new, *new.keywords, *(k.value for k in new.keywords)):
            ast.copy_location(part, node)
        new.keywords.extend(k for k in node.keywords if k.arg != "metaclass")
        return new

    # Async: the checks RestrictedPython applies to their synchronous twins.

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        result: ast.AST = self.node_contents_visit(node)
        return result

    def visit_Await(self, node: ast.Await) -> ast.AST:
        result: ast.AST = self.node_contents_visit(node)
        return result

    def _guard_aiter(self, node: ast.AsyncFor | ast.comprehension) -> ast.AST:
        node = self.node_contents_visit(node)
        if isinstance(node.target, ast.Tuple):
            spec = self.gen_unpack_spec(node.target)
            args: list[ast.expr] = [node.iter, spec, ast.Name("_getiter_", ast.Load())]
            node.iter = _call("_aiter_unpack_sequence_", args, node.iter)
        else:
            node.iter = _call("_getaiter_", [node.iter], node.iter)
        return node

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        return self._guard_aiter(node)

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        if node.is_async:
            return self._guard_aiter(node)
        return cast(ast.AST, self.guard_iter(node))

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        node = self.node_contents_visit(node)
        for item in reversed(node.items):
            if isinstance(item.optional_vars, ast.Tuple):
                tmp_target, unpack = self.gen_unpack_wrapper(node, item.optional_vars)
                item.optional_vars = tmp_target
                node.body.insert(0, unpack)
        return node


def restrict(tree: ast.Module, filename: str = "<program>") -> ast.Module:
    """Check and transform a parsed program (top-level await/return allowed) for the policy."""
    errors: list[str] = []
    policy = _AsyncPolicy(errors)
    # RestrictedPython reports through its own lists; any Python warning raised while
    # transforming is not a policy matter and must not escape into the caller.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = policy.visit(tree)
    policy.check_denied_loads(result)
    if errors:
        raise PolicyViolation(sorted(dict.fromkeys(errors), key=_line_of), filename)
    assert isinstance(result, ast.Module)
    return result  # every node added above already carries the location of what it replaces


def _line_of(message: str) -> int:
    head = message.partition(":")[0]
    return int(head[5:]) if head.startswith("line ") and head[5:].isdigit() else 0


# -- the guards the transformed code calls ------------------------------------------------------

_MISSING: Any = object()


class AccessDenied(AttributeError):
    """Raised in a program that reads or writes what the restricted policy hides."""


_ModuleType = types.ModuleType
# type -> are its instances hidden; filled on first sight, so the common case is one dict lookup.
_HIDDEN_BY_TYPE: dict[type, bool] = {}


def _is_hidden_type(kind: type) -> bool:
    hidden = _HIDDEN_BY_TYPE[kind] = issubclass(kind, _HIDDEN_TYPES)
    return hidden


def _real_module(module: types.ModuleType) -> str | None:
    """Its allow-list name, checked by identity: a renamed module must not borrow another's list."""
    name = getattr(module, "__name__", None)
    if type(name) is str and name in ALLOWED_MODULES and sys.modules.get(name) is module:
        return name
    return None


def _check_hidden(value: Any, what: str) -> None:
    """Refuse modules outside the allow-list, frames, code objects, tracebacks and event loops."""
    if isinstance(value, _ModuleType):
        if _real_module(value) is not None:
            return
        raise AccessDenied(f"{what} is the module {value.__name__!r}, which the policy hides")
    raise AccessDenied(f"{what} is a {type(value).__name__}, which the restricted policy hides")


def _check_value(value: Any, what: str) -> Any:
    hidden = _HIDDEN_BY_TYPE.get(type(value))
    if hidden or (hidden is None and _is_hidden_type(type(value))):
        _check_hidden(value, what)
    return value


def _owned(ob: Any) -> bool:
    """Created by the program: an instance of one of its classes, one of its classes or functions."""
    if getattr(type(ob), "__module__", None) == PROGRAM_MODULE:
        return True
    return isinstance(ob, type | types.FunctionType) and ob.__module__ == PROGRAM_MODULE


def _this_class(ob: super) -> Any:
    return getattr(ob, "__thisclass__")  # noqa: B009 (typeshed does not know the attribute)


# Names already found ordinary (no "_", not special): the common case costs one set lookup.
_PLAIN_NAMES: set[str] = set()


def _check_name(ob: Any, name: str) -> None:
    """The first sight of a name, and the rare ones: private, runtime handles, str formatting."""
    if type(name) is not str:
        raise TypeError(f"attribute name must be a string (exactly str), not {type(name).__name__}")
    if name.startswith("_"):
        # super().__init__() in the program's own classes; super(ModuleType, m).__init__("x")
        # would rename a module, super(SimpleNamespace, tools).__init__(...) rewrite bindings.
        if not (type(ob) is super and name in _MAGIC_METHODS and _owned(_this_class(ob))):
            raise AccessDenied(f"{name!r}: {_ATTRIBUTE_HINT}")
    elif name in _DENIED_ATTRIBUTES:
        raise AccessDenied(f"{name!r} is hidden in the restricted policy (it exposes the runtime)")
    elif name not in _FORMAT_METHODS:
        _PLAIN_NAMES.add(name)
    elif (
        not _owned(ob)
        or isinstance(ob, _FORMATTERS)
        or (isinstance(ob, type) and issubclass(ob, _FORMATTERS))
    ):
        # "{0.__class__}".format(x) walks attributes without _getattr_ (str, UserString,
        # string.Formatter, and subclasses); f-strings are checked when the program is compiled.
        owner = ob.__name__ if isinstance(ob, type) else type(ob).__name__
        raise AccessDenied(
            f"{owner}.{name}() is not allowed in the restricted policy; use an f-string, "
            "'%' formatting or string concatenation"
        )


def _guarded_getattr(ob: Any, name: str, default: Any = _MISSING) -> Any:
    """``_getattr_``: the attribute read every ``a.b`` in a program turns into."""
    # Exact str first: a str subclass whose __eq__/__hash__ lie would match a cached name.
    if type(name) is not str or name not in _PLAIN_NAMES:
        _check_name(ob, name)
    hidden = _HIDDEN_BY_TYPE.get(type(ob))
    if hidden or (hidden is None and _is_hidden_type(type(ob))):
        _check_owner(ob, name)
    value = getattr(ob, name) if default is _MISSING else getattr(ob, name, default)
    hidden = _HIDDEN_BY_TYPE.get(type(value))
    if hidden or (hidden is None and _is_hidden_type(type(value))):
        _check_hidden(value, f"attribute {name!r}")
    return value


def _check_owner(ob: Any, name: str) -> None:
    """Attributes of modules follow the allow-list; other hidden objects have none."""
    module = _real_module(ob) if isinstance(ob, _ModuleType) else None
    if module is None or not _module_allows(module, name):
        where = f"module {ob.__name__!r}" if isinstance(ob, _ModuleType) else type(ob).__name__
        raise AccessDenied(f"{where} attribute {name!r} is not available in the restricted policy")


def _guarded_getitem(ob: Any, key: Any) -> Any:
    """``_getitem_``: every ``a[k]`` read; the value passes the same check as attributes."""
    value = ob[key]
    hidden = _HIDDEN_BY_TYPE.get(type(value))
    if hidden or (hidden is None and _is_hidden_type(type(value))):
        _check_hidden(value, "the item")
    return value


class _ReadOnly:
    """What ``_write_`` gives for objects the program did not create: items yes, attributes no."""

    __slots__ = ("_ob",)
    _ob: Any

    def __init__(self, ob: object) -> None:
        object.__setattr__(self, "_ob", ob)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ob[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._ob[key]

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(
            f"cannot set attribute {name!r} of a {type(self._ob).__name__!r} object in the "
            "restricted policy; only objects the program created can be changed"
        )

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)


# Types whose instances take attribute writes: builtin containers, then each program class as
# it is first written to (a class's __module__ cannot change: the program cannot write "_" names).
_WRITABLE_TYPES: set[type] = {dict, list, set, bytearray}
# Stdlib objects whose public attributes are settings a program is meant to change.
_WRITABLE_FOREIGN = frozenset({("decimal", "Context")})


def _guarded_write(ob: Any) -> Any:
    """``_write_``: attribute writes reach only the program's own classes, instances, functions."""
    if type(ob) in _WRITABLE_TYPES:
        return ob
    kind = type(ob)
    if getattr(kind, "__module__", None) == PROGRAM_MODULE:
        _WRITABLE_TYPES.add(kind)
        return ob
    if _owned(ob) or (getattr(kind, "__module__", None), kind.__qualname__) in _WRITABLE_FOREIGN:
        return ob
    return _ReadOnly(ob)


_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "%=": operator.imod, "**=": operator.ipow, "<<=": operator.ilshift, ">>=": operator.irshift,
    "|=": operator.ior, "^=": operator.ixor, "&=": operator.iand, "//=": operator.ifloordiv,
    "@=": operator.imatmul,
}  # fmt: skip


def _inplacevar(op: str, x: Any, y: Any) -> Any:
    return _INPLACE[op](x, y)


def _apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


def _unpack(it: Any, spec: object, getiter: Callable[[Any], Any]) -> Any:
    # Iteration is not a privilege boundary here (_getiter_ checks nothing), so the native
    # unpacking RestrictedPython would re-check element by element is already the guarded one.
    return getiter(it)


def _aiter_unpack(it: Any, spec: object, getiter: object) -> Any:
    return aiter(it)


def _guarded_import(
    name: str,
    globals: Any = None,
    locals: Any = None,
    fromlist: Iterable[str] | None = (),
    level: int = 0,
) -> Any:
    """``__import__``: the allow-list, checked before anything is imported."""
    if level or type(name) is not str or name not in ALLOWED_MODULES:
        raise ImportError(f"{name!r} cannot be imported in the restricted policy; {_import_hint()}")
    for item in fromlist or ():
        if type(item) is not str or not (
            f"{name}.{item}" in ALLOWED_MODULES or _module_allows(name, item)
        ):
            raise ImportError(f"{item!r} cannot be imported from {name!r} in the restricted policy")
    module = builtins.__import__(name, globals, locals, tuple(fromlist or ()), 0)
    # `from datetime import sys` reads the attribute without _getattr_: check the values here.
    for item in fromlist or ():
        _check_value(getattr(module, item, None), f"{name}.{item}")
    return module


def _guarded_setattr(ob: Any, name: str, value: Any) -> None:
    if type(name) is not str or name.startswith("_") or name in _DENIED_ATTRIBUTES:
        raise AccessDenied(f"{name!r}: {_ATTRIBUTE_HINT}")
    setattr(_guarded_write(ob), name, value)


def _guarded_delattr(ob: Any, name: str) -> None:
    if type(name) is not str or name.startswith("_"):
        raise AccessDenied(f"{name!r}: {_ATTRIBUTE_HINT}")
    delattr(_guarded_write(ob), name)


def _guarded_hasattr(ob: Any, name: str) -> bool:
    try:
        _guarded_getattr(ob, name)
    except AccessDenied:
        raise
    except AttributeError:
        return False
    return True


class _TypeMeta(type):
    """``type`` is one-argument only, and never hands out a metaclass (``type(int)`` is itself)."""

    # A real metaclass (type, ABCMeta, EnumType) called with three arguments builds a class from
    # a dict whose keys skip the class-body checks, e.g. ``__reduce__``: copy.copy() would then
    # rebuild any object and write attributes into it past the write guard.

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) != 1 or kwargs:
            raise TypeError(
                "type() with three arguments is not allowed in the restricted policy; "
                "use a class statement"
            )
        kind = type(args[0])
        return cls if issubclass(kind, type) else kind

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, type)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, type)


class _Type(metaclass=_TypeMeta):
    """``type`` in a program."""


_PURE_BUILTINS = _names(
    "abs aiter all anext any ascii bin bool bytearray bytes callable chr classmethod complex "
    "divmod enumerate filter float format frozenset hash hex id int isinstance issubclass iter "
    "len list map max min next object oct ord pow print property range repr reversed round set "
    "slice sorted staticmethod str sum super tuple zip dict Ellipsis NotImplemented "
    "__build_class__"
)


def _safe_builtins() -> dict[str, object]:
    names: dict[str, object] = {n: getattr(builtins, n) for n in _PURE_BUILTINS}
    for n in dir(builtins):
        value = getattr(builtins, n)
        if isinstance(value, type) and issubclass(value, BaseException):
            names[n] = value
    names.update(
        __import__=_guarded_import,
        getattr=_guarded_getattr,
        hasattr=_guarded_hasattr,
        setattr=_guarded_setattr,
        delattr=_guarded_delattr,
        type=_Type,
    )
    return names


_BUILTINS = _safe_builtins()


def restricted_globals() -> dict[str, object]:
    """A fresh namespace: safe ``__builtins__``, ``__name__``, every hook restricted code calls."""
    # dataclasses looks string annotations up in sys.modules[cls.__module__]: give it an empty one.
    sys.modules.setdefault(PROGRAM_MODULE, types.ModuleType(PROGRAM_MODULE))
    return {
        "__builtins__": dict(_BUILTINS),
        "__name__": PROGRAM_MODULE,
        "__metaclass__": type,
        "_getattr_": _guarded_getattr,
        "_getitem_": _guarded_getitem,
        "_getiter_": iter,
        "_getaiter_": aiter,
        "_iter_unpack_sequence_": _unpack,
        "_unpack_sequence_": _unpack,
        "_aiter_unpack_sequence_": _aiter_unpack,
        "_write_": _guarded_write,
        "_inplacevar_": _inplacevar,
        "_apply_": _apply,
    }
