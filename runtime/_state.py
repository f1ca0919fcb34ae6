"""A session's state, inside the child only: the program's module globals to a blob and back.

cloudpickle carries what the program defined by value (functions, closures, classes and
their instances, lambdas) and imported modules by reference. A function the program defined
is rebuilt, on restore, over the *new* run's module namespace (not a copy of the old one),
so it sees the globals of the run that calls it, as in a REPL. Names that cannot be carried
are dropped, each with its reason. The host stores the blob and never unpickles it: a blob
is only ever loaded here, under the run's containment.
"""

from __future__ import annotations

import functools
import io
import pickle
import sys
import types
from collections.abc import Iterable
from typing import Any

import cloudpickle

__all__ = ("StateTooLarge", "restore", "save")

_PROTOCOL = 5


class StateTooLarge(Exception):
    """The state's blob would pass ``max_state_bytes``."""

    def __init__(self, size: int, limit: int, biggest: list[tuple[str, int]]) -> None:
        names = ", ".join(f"{name} ({size} bytes)" for name, size in biggest)
        super().__init__(
            f"the session's state ({size} bytes) would pass max_state_bytes ({limit}); the "
            f"biggest names: {names}; delete what the next runs do not need (del name)"
        )
        self.size = size
        self.limit = limit


class _Empty:
    """Stands for a closure cell not yet filled (pickled by reference: this class)."""


def _skeleton(code: types.CodeType, name: str, cells: int) -> types.FunctionType:
    """A program's function, over the module namespace of the run restoring it (its
    defaults and closure come after, so a function that refers to itself can be rebuilt)."""
    namespace = sys.modules["__main__"].__dict__
    closure = tuple(types.CellType() for _ in range(cells)) if cells >= 0 else None
    return types.FunctionType(code, namespace, name, None, closure)


def _fill(func: types.FunctionType, state: tuple[Any, ...]) -> None:
    qualname, defaults, kwdefaults, contents, attributes, annotations, doc = state
    func.__qualname__ = qualname
    func.__defaults__ = defaults
    func.__kwdefaults__ = kwdefaults
    func.__annotations__ = annotations
    func.__doc__ = doc
    func.__module__ = "__main__"
    func.__dict__.update(attributes)
    for cell, value in zip(func.__closure__ or (), contents, strict=True):
        if value is not _Empty:
            cell.cell_contents = value


def _lru_cached(func: Any, maxsize: int | None, typed: bool) -> Any:
    return functools.lru_cache(maxsize=maxsize, typed=typed)(func)


def _cell_contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet filled: keep it empty
        return _Empty


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    """cloudpickle, with the program's functions rebuilt over the restoring run's globals."""

    def __init__(self, file: io.BytesIO, namespace: dict[str, Any]) -> None:
        super().__init__(file, protocol=_PROTOCOL)
        self._namespace = namespace

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is functools._lru_cache_wrapper:  # pickled by name: rebuild it around its function
            parameters = obj.cache_parameters()
            return (_lru_cached, (obj.__wrapped__, parameters["maxsize"], parameters["typed"]))
        if isinstance(obj, io.IOBase):
            raise TypeError(f"an open {kind.__name__} cannot be carried to the next run: reopen it")
        main = getattr(obj, "__module__", None) == "__main__"
        if main and kind is not types.FunctionType and not isinstance(obj, type):
            reduced = obj.__reduce_ex__(_PROTOCOL)
            if isinstance(reduced, str):  # by name: the next run's __main__ has no such name
                raise TypeError(
                    f"{reduced!r} is carried by name, and the next run's module has none yet"
                )
        if kind is types.FunctionType and obj.__globals__ is self._namespace:
            closure = obj.__closure__ or ()
            state = (
                obj.__qualname__,
                obj.__defaults__,
                obj.__kwdefaults__,
                tuple(_cell_contents(cell) for cell in closure),
                dict(obj.__dict__),
                dict(obj.__annotations__),
                obj.__doc__,
            )
            cells = len(closure) if obj.__closure__ is not None else -1
            return (_skeleton, (obj.__code__, obj.__name__, cells), state, None, None, _fill)
        return super().reducer_override(obj)


def _dumps(values: dict[str, Any], namespace: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, namespace).dump(values)
    return buffer.getvalue()


def _carried(namespace: dict[str, Any], skip: Iterable[str]) -> dict[str, Any]:
    skipped = set(skip)
    return {
        name: value
        for name, value in namespace.items()
        if not (name.startswith("__") and name.endswith("__")) and name not in skipped
    }


def save(
    namespace: dict[str, Any], *, skip: Iterable[str], max_bytes: int
) -> tuple[bytes, dict[str, str]]:
    """The blob of the program's globals (but dunders and ``skip``), and the names dropped
    with their reasons. Raises ``StateTooLarge``."""
    values = _carried(namespace, skip)
    dropped: dict[str, str] = {}
    try:
        blob = _dumps(values, namespace)
    except Exception:
        for name in list(values):  # find what cannot be carried, carry the rest together
            try:
                _dumps({name: values[name]}, namespace)
            except Exception as exc:
                dropped[name] = _reason(exc)
                del values[name]
        blob = _dumps(values, namespace)
    if len(blob) > max_bytes:
        sizes = sorted(
            ((name, len(_dumps({name: value}, namespace))) for name, value in values.items()),
            key=lambda item: -item[1],
        )
        raise StateTooLarge(len(blob), max_bytes, sizes[:5])
    return blob, dropped


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    text = text if len(text) <= 200 else text[:199] + "…"
    return f"{type(exc).__name__}: {text}" if not text.startswith(type(exc).__name__) else text


def restore(blob: bytes, namespace: dict[str, Any]) -> list[str]:
    """Load a blob into ``namespace`` (the run's ``__main__``); the names it set. Raises
    whatever unpickling raised (a blob of another Python, a module that no longer imports)."""
    values = pickle.loads(blob)
    if not isinstance(values, dict):
        raise TypeError(f"a session's state is a dict of names, not {type(values).__name__}")
    for name, value in values.items():
        if type(name) is str:
            namespace[name] = value
    return sorted(values)
