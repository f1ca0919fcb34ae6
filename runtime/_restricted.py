"""The restricted policy: RestrictedPython extended to async programs (the AST checks and
rewrites; the tables in ``_restricted_tables``, the run-time guards in ``_restricted_guards``)."""

from __future__ import annotations

import ast
import warnings
from typing import Any, cast

from RestrictedPython.transformer import (
    IOPERATOR_TO_STR,
    RestrictingNodeTransformer,
    copy_locations,
)

from runtime._restricted_guards import AccessDenied, restricted_globals
from runtime._restricted_tables import (
    ALLOWED_MODULES,
    ATTRIBUTE_HINT,
    DENIED_ATTRIBUTES,
    DENIED_BUILTINS,
    MAGIC_METHODS,
    NODE_HINTS,
    PROGRAM_MODULE,
    PolicyViolation,
    import_hint,
    module_allows,
)

__all__ = (
    "ALLOWED_MODULES",
    "PROGRAM_MODULE",
    "AccessDenied",
    "PolicyViolation",
    "restrict",
    "restricted_globals",
)


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
            info = f"{info.rstrip('.')}: {ATTRIBUTE_HINT}"
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
        hint = NODE_HINTS.get(kind, "rewrite it with plain statements")
        self.error(node, f"`{kind}` statements are not allowed in the restricted policy; {hint}")

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None or name == "_":
            return
        if name.startswith("_"):
            if allow_magic_methods and name in MAGIC_METHODS and node.col_offset != 0:
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
        if node.id in DENIED_BUILTINS and isinstance(node.ctx, ast.Load):
            self.denied_loads.append(node)  # judged once the whole program is seen
        self.check_name(node, node.id)
        return node

    def check_denied_loads(self, tree: ast.AST) -> None:
        """A denied builtin is an error unless the program binds that name itself somewhere."""
        bound = _bound_names(tree) if self.denied_loads else set()
        for node in self.denied_loads:
            if node.id not in bound:
                hint = DENIED_BUILTINS[node.id]
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
            node.attr in MAGIC_METHODS
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
                f"{import_hint()}",
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
                allowed = full in ALLOWED_MODULES or module_allows(module, alias.name)
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
            if target.attr.startswith("_") or target.attr in DENIED_ATTRIBUTES:
                self.error(node, f'"{target.attr}" cannot be assigned: {ATTRIBUTE_HINT}')
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
