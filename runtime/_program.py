"""Compiling and running a program as a module: CPython's semantics, plus top-level ``await``
and ``return`` and the last-expression rule.

A program compiles to module code (``PyCF_ALLOW_TOP_LEVEL_AWAIT``) executed in the module
namespace it is given, so globals, class scopes, ``exec``/``eval``, qualnames and
``from __future__`` behave exactly as under ``python prog.py``. Two rewrites make the extras:
a top-level ``return v`` raises ``ProgramReturn(v)`` (a ``BaseException`` that a top-level
``try``'s handlers let through, and that a ``with`` block's manager sees as a normal exit), and
a trailing bare expression is recorded as the program's value.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import sys
import threading
import types
import warnings
from collections.abc import Coroutine
from typing import Any, Literal, cast

__all__ = (
    "ABSENT",
    "FILENAME",
    "HIDDEN_FILENAME",
    "LAST_NAME",
    "RETURN_NAME",
    "Bare",
    "Policy",
    "ProgramRejected",
    "ProgramReturn",
    "compile_program",
    "install_helpers",
    "is_async",
    "run_async",
    "run_sync",
    "source_lines",
)

Policy = Literal["python", "restricted"]

FILENAME = "<program>"
#: Code a host compiles under this file name (a prelude of its own) is left out of the
#: program's tracebacks: its frames are ours, not the program's.
HIDDEN_FILENAME = "<dsh-code>"
#: Builtins the rewritten program calls: the top-level ``return`` and the trailing expression.
RETURN_NAME = "__dsh_return__"
LAST_NAME = "__dsh_last__"
_RETURN_GUARD = "__dsh_returning__"
_ARETURN_GUARD = "__dsh_areturning__"
_BOM = "\ufeff"


class _Absent:
    """The program completed without a result."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class Bare:
    """What ``run_sync``/``run_async`` give for a trailing bare expression's value (not a
    ``return``): a value that is not JSON is then shown as its ``repr``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class ProgramReturn(BaseException):
    """Raised by a top-level ``return``; carries the program's result."""

    def __init__(self, value: Any = None) -> None:
        super().__init__()
        self.value = value


class ProgramRejected(Exception):
    """The program does not parse, or the policy rejects it (failure kind ``parse``)."""

    def __init__(
        self, message: str, lineno: int | None = None, exception_type: str = "SyntaxError"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.lineno = lineno
        self.exception_type = exception_type


# ---- the program's side: helpers its rewritten code calls --------------------------------------

#: The trailing expression's value, by the id of the module namespace it was computed in.
_LAST: dict[int, Any] = {}


def _record_last(value: Any) -> None:
    """Record the value of the program's trailing bare expression (``None`` means no result)."""
    if value is not None:
        _LAST[id(sys._getframe(1).f_globals)] = value


def _cm_error(manager: Any, protocol: str) -> TypeError:
    return TypeError(
        f"{type(manager).__name__!r} object does not support the {protocol}context manager protocol"
    )


class _Returning:
    """Wraps a ``with`` block's manager: a top-level ``return`` in the block leaves it as a
    function's ``return`` would, with ``__exit__(None, None, None)``."""

    __slots__ = ("_exit", "_manager")

    def __init__(self, manager: Any) -> None:
        kind = type(manager)
        if not (hasattr(kind, "__enter__") and hasattr(kind, "__exit__")):
            raise _cm_error(manager, "")
        self._manager = manager
        self._exit = kind.__exit__

    def __enter__(self) -> Any:
        return type(self._manager).__enter__(self._manager)

    def __exit__(self, kind: Any, value: Any, tb: Any) -> Any:
        if isinstance(value, ProgramReturn):
            self._exit(self._manager, None, None, None)
            return False
        return self._exit(self._manager, kind, value, tb)


class _AsyncReturning:
    """``_Returning`` for ``async with``."""

    __slots__ = ("_exit", "_manager")

    def __init__(self, manager: Any) -> None:
        kind = type(manager)
        if not (hasattr(kind, "__aenter__") and hasattr(kind, "__aexit__")):
            raise _cm_error(manager, "asynchronous ")
        self._manager = manager
        self._exit = kind.__aexit__

    async def __aenter__(self) -> Any:
        return await type(self._manager).__aenter__(self._manager)

    async def __aexit__(self, kind: Any, value: Any, tb: Any) -> Any:
        if isinstance(value, ProgramReturn):
            await self._exit(self._manager, None, None, None)
            return False
        return await self._exit(self._manager, kind, value, tb)


_HELPERS: dict[str, Any] = {
    RETURN_NAME: ProgramReturn,
    LAST_NAME: _record_last,
    _RETURN_GUARD: _Returning,
    _ARETURN_GUARD: _AsyncReturning,
}


def install_helpers(target: Any = builtins) -> None:
    """Make the helpers the rewritten code calls reachable as builtins (a module or a dict)."""
    if isinstance(target, dict):
        target.update(_HELPERS)
    else:
        for name, value in _HELPERS.items():
            setattr(target, name, value)


# ---- compiling --------------------------------------------------------------------------------


def _syntax_message(exc: SyntaxError) -> str:
    where = f"line {exc.lineno}" if exc.lineno else "unknown line"
    if exc.offset:
        where += f", column {exc.offset}"
    text = f"{type(exc).__name__}: {exc.msg} ({where})"
    if exc.text:
        line = exc.text.rstrip("\n")
        text += f"\n    {line.strip()}"
        if exc.offset:
            indent = len(line) - len(line.lstrip())
            text += "\n    " + " " * max(exc.offset - 1 - indent, 0) + "^"
    return text


def _rejected(exc: SyntaxError) -> ProgramRejected:
    return ProgramRejected(_syntax_message(exc), exc.lineno, type(exc).__name__)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class _TopLevelReturns(ast.NodeTransformer):
    """Rewrites the module scope's ``return`` statements (not those of functions or classes)."""

    def __init__(self) -> None:
        self.found = 0

    def visit_FunctionDef(self, node: ast.AST) -> ast.AST:
        return node  # a new scope: its returns are its own

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.found += 1
        value = node.value if node.value is not None else ast.Constant(None)
        call = ast.Call(func=ast.Name(RETURN_NAME, ast.Load()), args=[value], keywords=[])
        return ast.copy_location(ast.Raise(exc=ast.copy_location(call, node), cause=None), node)

    def _body_returns(self, node: ast.stmt, fields: tuple[str, ...]) -> bool:
        """Rewrite ``node``'s children; True if the statements in ``fields`` held a return."""
        before = self.found
        for name in fields:
            setattr(node, name, [self.visit(child) for child in getattr(node, name)])
        inside = self.found > before
        for name in node._fields:
            if name not in fields and isinstance(getattr(node, name, None), list):
                value = getattr(node, name)
                if value and isinstance(value[0], ast.AST):
                    setattr(node, name, [self.visit(child) for child in value])
        return inside

    def visit_Try(self, node: ast.Try) -> ast.AST:
        if self._body_returns(node, ("body",)) and node.handlers:
            # `except:` and `except BaseException:` must not catch the return
            guard = ast.ExceptHandler(type=ast.Name(RETURN_NAME, ast.Load()), name=None, body=[])
            guard.body = [ast.copy_location(ast.Raise(exc=None, cause=None), node)]
            node.handlers.insert(0, ast.copy_location(guard, node))
        return node

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def visit_With(self, node: ast.With | ast.AsyncWith) -> ast.AST:
        if self._body_returns(node, ("body",)):
            guard = _ARETURN_GUARD if isinstance(node, ast.AsyncWith) else _RETURN_GUARD
            for item in node.items:
                call = ast.Call(
                    func=ast.Name(guard, ast.Load()), args=[item.context_expr], keywords=[]
                )
                item.context_expr = ast.copy_location(call, item.context_expr)
        return node

    visit_AsyncWith = visit_With


def _rewrite(tree: ast.Module) -> ast.Module:
    """Top-level returns raise ``ProgramReturn``; a trailing bare expression is recorded."""
    tree = _TopLevelReturns().visit(tree)
    assert isinstance(tree, ast.Module)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        call = ast.Call(func=ast.Name(LAST_NAME, ast.Load()), args=[last.value], keywords=[])
        last.value = ast.copy_location(call, last.value)
    return ast.fix_missing_locations(tree)


def _parse(source: str) -> ast.Module:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings ("is" with a literal) are not failures
            return ast.parse(source, FILENAME, "exec")
    except SyntaxError as exc:
        raise _rejected(exc) from None
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, absurd nesting
        raise ProgramRejected(f"SyntaxError: the program cannot be parsed: {exc}") from None


#: CPython 3.11 counts the AST constructor's recursion per interpreter, not per thread: two
#: threads building ASTs at once can fail one with a spurious ``SystemError`` ("AST
#: constructor recursion depth mismatch", python/cpython#106905). Our compiles take turns
#: (this also keeps ``warnings.catch_warnings`` to one thread), and one that another
#: library's parse in another thread disturbed is tried once more.
_AST_TURNS = threading.Lock()
_AST_RACE = "recursion depth mismatch"


def compile_program(source: str, policy: Policy = "python") -> types.CodeType:
    """Compile ``source`` into module code for ``run_sync``/``run_async``.

    Raises ``ProgramRejected`` when it does not parse, or breaks the policy.
    """
    if policy not in ("python", "restricted"):
        raise ValueError(f"unknown policy {policy!r}: use 'python' or 'restricted'")
    with _AST_TURNS:
        try:
            return _compile(source, policy)
        except SystemError as exc:
            if _AST_RACE not in str(exc):
                raise
            return _compile(source, policy)


def _compile(source: str, policy: Policy) -> types.CodeType:
    tree = _parse(source.removeprefix(_BOM))  # CPython accepts a UTF-8 BOM before a script
    if policy == "restricted":
        from runtime._restricted import PolicyViolation, restrict

        try:
            tree = restrict(tree, FILENAME)
        except PolicyViolation as exc:
            first = re.match(r"line (\d+):", exc.messages[0]) if exc.messages else None
            lineno = int(first.group(1)) if first else None
            raise ProgramRejected("\n".join(exc.messages), lineno, "PolicyViolation") from None
    tree = _rewrite(tree)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code: types.CodeType = compile(
                tree, FILENAME, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
            )
            return code
    except SyntaxError as exc:
        raise _rejected(exc) from None
    except (ValueError, MemoryError, RecursionError) as exc:
        raise ProgramRejected(f"SyntaxError: the program cannot be compiled: {exc}") from None


def source_lines(source: str) -> list[str]:
    """The program's lines as the compiler counts them (``\n``, ``\r\n`` or ``\r`` end one;
    form feeds and other separators ``str.splitlines`` knows do not), each ending in ``\n``,
    as ``traceback`` expects of the lines it places its carets under."""
    text = source.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line + "\n" for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    return lines


def is_async(code: types.CodeType) -> bool:
    """True if the program awaits at its top level (it then needs an event loop)."""
    return bool(code.co_flags & inspect.CO_COROUTINE)


# ---- running ----------------------------------------------------------------------------------

# What runs after the program, bound now: the program may have replaced the builtins.
_isinstance: Any = isinstance
_len, _id = len, id


def _returned(exc: BaseException) -> ProgramReturn | None:
    """The ``ProgramReturn`` that ``exc`` is, or that an ``except*`` wrapped alone in a group."""
    if _isinstance(exc, ProgramReturn):
        return cast(ProgramReturn, exc)
    if _isinstance(exc, BaseExceptionGroup):
        group = cast(BaseExceptionGroup[BaseException], exc)
        if _len(group.exceptions) == 1:
            return _returned(group.exceptions[0])
    return None


def _completion(namespace: dict[str, Any]) -> Any:
    value = _LAST.pop(_id(namespace), ABSENT)
    return value if value is ABSENT else Bare(value)


def run_sync(code: types.CodeType, namespace: dict[str, Any]) -> Any:
    """Execute module code that does not await at the top level; its result (a trailing bare
    expression's wrapped in ``Bare``), or ``ABSENT``.

    Raises whatever the program raised (never ``ProgramReturn``).
    """
    _LAST.pop(id(namespace), None)
    try:
        exec(code, namespace)
    except BaseException as exc:
        returned = _returned(exc)
        _LAST.pop(_id(namespace), None)
        if returned is None:
            raise
        return returned.value
    return _completion(namespace)


async def run_async(code: types.CodeType, namespace: dict[str, Any]) -> Any:
    """``run_sync`` for a program that awaits at the top level (on the running loop)."""
    _LAST.pop(id(namespace), None)
    try:
        coroutine: Coroutine[Any, Any, Any] = eval(code, namespace)
        await coroutine
    except BaseException as exc:
        returned = _returned(exc)
        _LAST.pop(_id(namespace), None)
        if returned is None:
            raise
        return returned.value
    return _completion(namespace)
