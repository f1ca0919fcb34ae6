"""The restricted policy's run-time guards: what the transformed program calls for every
attribute, item, write, import and ``type()``, and the namespace that holds them."""

from __future__ import annotations

import builtins
import operator
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from runtime._restricted_tables import (
    ALLOWED_MODULES,
    ATTRIBUTE_HINT,
    DENIED_ATTRIBUTES,
    FORMAT_METHODS,
    FORMATTERS,
    HIDDEN_TYPES,
    MAGIC_METHODS,
    PROGRAM_MODULE,
    import_hint,
    module_allows,
    names,
)

__all__ = ("AccessDenied", "restricted_globals")


# -- the guards the transformed code calls ------------------------------------------------------

_MISSING: Any = object()


class AccessDenied(AttributeError):
    """Raised in a program that reads or writes what the restricted policy hides."""


# A program's traceback names it as it names ToolCallError: bare, not by our module's path.
AccessDenied.__module__ = "builtins"


_ModuleType = types.ModuleType
# type -> are its instances hidden; filled on first sight, so the common case is one dict lookup.
_HIDDEN_BY_TYPE: dict[type, bool] = {}


def _is_hidden_type(kind: type) -> bool:
    hidden = _HIDDEN_BY_TYPE[kind] = issubclass(kind, HIDDEN_TYPES)
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
        if not (type(ob) is super and name in MAGIC_METHODS and _owned(_this_class(ob))):
            raise AccessDenied(f"{name!r}: {ATTRIBUTE_HINT}")
    elif name in DENIED_ATTRIBUTES:
        raise AccessDenied(f"{name!r} is hidden in the restricted policy (it exposes the runtime)")
    elif name not in FORMAT_METHODS:
        _PLAIN_NAMES.add(name)
    elif (
        not _owned(ob)
        or isinstance(ob, FORMATTERS)
        or (isinstance(ob, type) and issubclass(ob, FORMATTERS))
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
    if module is None or not module_allows(module, name):
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
        raise ImportError(f"{name!r} cannot be imported in the restricted policy; {import_hint()}")
    for item in fromlist or ():
        if type(item) is not str or not (
            f"{name}.{item}" in ALLOWED_MODULES or module_allows(name, item)
        ):
            raise ImportError(f"{item!r} cannot be imported from {name!r} in the restricted policy")
    module = builtins.__import__(name, globals, locals, tuple(fromlist or ()), 0)
    # `from datetime import sys` reads the attribute without _getattr_: check the values here.
    for item in fromlist or ():
        _check_value(getattr(module, item, None), f"{name}.{item}")
    return module


def _guarded_setattr(ob: Any, name: str, value: Any) -> None:
    if type(name) is not str or name.startswith("_") or name in DENIED_ATTRIBUTES:
        raise AccessDenied(f"{name!r}: {ATTRIBUTE_HINT}")
    setattr(_guarded_write(ob), name, value)


def _guarded_delattr(ob: Any, name: str) -> None:
    if type(name) is not str or name.startswith("_"):
        raise AccessDenied(f"{name!r}: {ATTRIBUTE_HINT}")
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


_PURE_BUILTINS = names(
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
