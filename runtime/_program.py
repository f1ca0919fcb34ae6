"""Compiling a program: the body of an async function, with the last-expression rule."""

from __future__ import annotations

import ast
import inspect
import re
import types
import warnings
from typing import Any, Literal

__all__ = (
    "ABSENT_NAME",
    "ENTRY_NAME",
    "FILENAME",
    "LAST_NAME",
    "Policy",
    "ProgramRejected",
    "compile_program",
)

Policy = Literal["python", "restricted"]

FILENAME = "<program>"
#: The async function the program becomes, and the two helpers of the last-expression rule.
ENTRY_NAME = "__dsh_program__"
LAST_NAME = "__dsh_last__"
ABSENT_NAME = "__dsh_absent__"


class ProgramRejected(Exception):
    """The program does not parse, or the policy rejects it (failure kind ``parse``)."""

    def __init__(self, message: str, lineno: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.lineno = lineno


def _syntax_message(exc: SyntaxError) -> str:
    where = f"line {exc.lineno}" if exc.lineno else "unknown line"
    if exc.offset:
        where += f", column {exc.offset}"
    text = f"SyntaxError: {exc.msg} ({where})"
    if exc.text:
        line = exc.text.rstrip("\n")
        text += f"\n    {line.strip()}"
        if exc.offset:
            indent = len(line) - len(line.lstrip())
            text += "\n    " + " " * max(exc.offset - 1 - indent, 0) + "^"
    return text


def _wrap(tree: ast.Module) -> ast.Module:
    """``<body>`` -> ``async def __dsh_program__(): <body>; return __dsh_absent__``."""
    body: list[ast.stmt] = list(tree.body) or [ast.Pass()]
    last = body[-1]
    if isinstance(last, ast.Expr):
        call = ast.Call(func=ast.Name(LAST_NAME, ast.Load()), args=[last.value], keywords=[])
        body[-1] = ast.copy_location(ast.Return(value=ast.copy_location(call, last)), last)
    end = ast.Return(value=ast.Name(ABSENT_NAME, ast.Load()))
    body.append(ast.copy_location(end, body[-1]))
    func = ast.AsyncFunctionDef(
        name=ENTRY_NAME,
        args=ast.arguments(
            posonlyargs=[],
            args=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=body,
        decorator_list=[],
        returns=None,
        lineno=1,
        col_offset=0,
    )
    module = ast.Module(body=[func], type_ignores=[])
    return ast.fix_missing_locations(module)


class _TopLevelYield(ast.NodeVisitor):
    """Finds a ``yield`` that belongs to the program's own scope (not a nested function's)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return None

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
    visit_Lambda = visit_FunctionDef  # type: ignore[assignment]
    visit_ClassDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Yield(self, node: ast.Yield | ast.YieldFrom) -> None:
        raise ProgramRejected(
            f"SyntaxError: `yield` is not allowed at the top level of a program (line {node.lineno})",
            node.lineno,
        )

    visit_YieldFrom = visit_Yield


def _check_top_level(tree: ast.Module) -> None:
    _TopLevelYield().visit(tree)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            raise ProgramRejected(
                "SyntaxError: `from __future__ import ...` is not supported in a program "
                f"(line {node.lineno}); remove it",
                node.lineno,
            )


def compile_program(source: str, policy: Policy = "python") -> types.CodeType:
    """Compile ``source`` into a module code object that defines the program's async function.

    Raises ``ProgramRejected`` when it does not parse, is a generator, or breaks the policy.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings ("is" with a literal) are not failures
            tree = ast.parse(source, FILENAME, "exec")
    except SyntaxError as exc:
        raise ProgramRejected(_syntax_message(exc), exc.lineno) from None
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, absurd nesting
        raise ProgramRejected(f"SyntaxError: the program cannot be parsed: {exc}") from None
    _check_top_level(tree)
    if policy == "restricted":
        from runtime._restricted import PolicyViolation, restrict

        try:
            tree = restrict(tree, FILENAME)
        except PolicyViolation as exc:
            first = re.match(r"line (\d+):", exc.messages[0]) if exc.messages else None
            lineno = int(first.group(1)) if first else None
            raise ProgramRejected("\n".join(exc.messages), lineno) from None
    elif policy != "python":
        raise ValueError(f"unknown policy {policy!r}: use 'python' or 'restricted'")
    module = _wrap(tree)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = compile(module, FILENAME, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise ProgramRejected(_syntax_message(exc), exc.lineno) from None
    except (ValueError, MemoryError, RecursionError) as exc:
        raise ProgramRejected(f"SyntaxError: the program cannot be compiled: {exc}") from None
    entry = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    if entry.co_flags & inspect.CO_ASYNC_GENERATOR:
        raise ProgramRejected("SyntaxError: `yield` is not allowed at the top level of a program")
    return code


def entry_point(code: types.CodeType, namespace: dict[str, Any]) -> Any:
    """Execute the compiled module in ``namespace`` and return the program's async function."""
    exec(code, namespace)
    func = namespace.pop(ENTRY_NAME)
    func.__code__ = func.__code__.replace(co_name="<module>", co_qualname="<module>")
    return func
