"""Fixed naming rules: Python attribute names for tools, type names, identifier tests."""

from __future__ import annotations

import re
from collections.abc import Iterable

_NOT_WORD = re.compile(r"[^A-Za-z0-9_]")
_PARTS = re.compile(r"[A-Za-z0-9]+")
_TS_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")

# Globals a generated type name must not shadow, in the Python stub or in a TypeScript
# script whose global scope may hold the ES, DOM or Node.js libraries.
_TS_GLOBALS = (
    "Array",
    "Attr",
    "Audio",
    "Blob",
    "Body",
    "Boolean",
    "Buffer",
    "Cache",
    "Client",
    "Comment",
    "Credential",
    "Crypto",
    "Date",
    "Document",
    "Element",
    "Error",
    "Event",
    "EventTarget",
    "File",
    "FormData",
    "Function",
    "Headers",
    "History",
    "Image",
    "Infinity",
    "Intl",
    "JSON",
    "JsonValue",
    "Location",
    "Map",
    "Math",
    "NaN",
    "Navigator",
    "Node",
    "Notification",
    "Number",
    "Object",
    "Option",
    "Partial",
    "Performance",
    "Permissions",
    "Position",
    "Promise",
    "Proxy",
    "Range",
    "Readonly",
    "Record",
    "Reflect",
    "RegExp",
    "Request",
    "Response",
    "Screen",
    "Selection",
    "Set",
    "Storage",
    "String",
    "Symbol",
    "Text",
    "ToolCallError",
    "URL",
    "Window",
    "Worker",
)
_TYPING = ("Literal", "NotRequired", "TypeAlias", "TypedDict", "Unpack", "tools")
# Names the stub's annotations use: a method of `class tools` must not shadow them.
_SHADOWS = frozenset(
    [
        "Exception",
        "JsonValue",
        "Literal",
        "NotRequired",
        "TypeAlias",
        "TypedDict",
        "ToolCallError",
        "Unpack",
        "bool",
        "dict",
        "float",
        "int",
        "list",
        "str",
    ]
)
# Python's builtins and soft keywords, frozen (3.11 to 3.13) so that the SDK's bytes do not
# depend on the interpreter that renders it.
_PY_BUILTINS = (
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
    "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
    "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
    "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError",
    "Exception", "ExceptionGroup", "False", "FileExistsError", "FileNotFoundError",
    "FloatingPointError", "FutureWarning", "GeneratorExit", "IOError", "ImportError",
    "ImportWarning", "IndentationError", "IndexError", "InterruptedError", "IsADirectoryError",
    "KeyError", "KeyboardInterrupt", "LookupError", "MemoryError", "ModuleNotFoundError",
    "NameError", "None", "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError",
    "OverflowError", "PendingDeprecationWarning", "PermissionError", "ProcessLookupError",
    "PythonFinalizationError", "RecursionError", "ReferenceError", "ResourceWarning",
    "RuntimeError", "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError",
    "SyntaxWarning", "SystemError", "SystemExit", "TabError", "TimeoutError", "True", "TypeError",
    "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError",
    "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError", "Warning",
    "ZeroDivisionError", "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool",
    "breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod", "compile", "complex",
    "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate", "eval", "exec",
    "exit", "filter", "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash",
    "help", "hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "license",
    "list", "locals", "map", "max", "memoryview", "min", "next", "object", "oct", "open", "ord",
    "pow", "print", "property", "quit", "range", "repr", "reversed", "round", "set", "setattr",
    "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "vars", "zip",
)  # fmt: skip
_PY_SOFT_KEYWORDS = ("_", "case", "match", "type")
_PY_KEYWORDS = (
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
    "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
    "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
    "try", "while", "with", "yield",
)  # fmt: skip
RESERVED_TYPE_NAMES = frozenset(
    [*_TS_GLOBALS, *_TYPING, *_PY_BUILTINS, *_PY_KEYWORDS, *_PY_SOFT_KEYWORDS]
)


def is_py_name(name: str) -> bool:
    """Tell whether name can be written as a Python keyword argument or TypedDict class key."""
    return (
        name.isascii()
        and name.isidentifier()
        and name not in _PY_KEYWORDS
        and not name.startswith("__")
    )


def is_ts_name(name: str) -> bool:
    """Tell whether name can be written unquoted as a TypeScript property name."""
    return _TS_IDENT.fullmatch(name) is not None


def escape_tool_name(name: str) -> str:
    """Escape one tool name to a Python attribute name, before collisions are resolved.

    Rules, in order: characters other than ASCII letters, digits and `_` become `_`; a
    name that is empty or starts with a digit gets a `_` prefix; a keyword, or a name the
    stub's annotations use (`list`, `str`, `Literal`, ...), gets a `_` suffix; a name
    starting with `__` gets a `tool` prefix.
    """
    escaped = _NOT_WORD.sub("_", name)
    if not escaped or escaped[0].isdigit():
        escaped = "_" + escaped
    if escaped in _PY_KEYWORDS or escaped in _SHADOWS:
        escaped += "_"
    if escaped.startswith("__"):
        escaped = "tool" + escaped
    return escaped


def python_tool_names(names: Iterable[str]) -> dict[str, str]:
    """Map each original tool name to its unique Python attribute name.

    A name that needs no escaping keeps it. Escaped names are then given out in the
    sorted order of the original names; a taken one gets `_2`, `_3`, ... appended (and
    the `tool` prefix if that makes it start with `__`).
    """
    ordered = sorted(set(names))
    result: dict[str, str] = {}
    taken: set[str] = set()
    for name in ordered:
        if escape_tool_name(name) == name:
            result[name] = name
            taken.add(name)
    for name in ordered:
        if name in result:
            continue
        base = candidate = escape_tool_name(name)
        n = 2
        while candidate in taken:
            candidate = f"{base}_{n}"
            candidate = "tool" + candidate if candidate.startswith("__") else candidate
            n += 1
        result[name] = candidate
        taken.add(candidate)
    return {name: result[name] for name in ordered}


def camel(text: str) -> str:
    """CamelCase a name for a type: `read_file` -> `ReadFile`, `getURL` -> `GetURL`."""
    word = "".join(part[0].upper() + part[1:] for part in _PARTS.findall(text))
    if not word or word[0].isdigit():
        word = "T" + word
    return word


class TypeNames:
    """Give out unique type names: the first free of `base`, `base_2`, `base_3`, ..."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._taken: set[str] = {*RESERVED_TYPE_NAMES, *taken}

    def allocate(self, base: str, *preferred: str) -> str:
        """Return the first free of ``preferred``, else of base, base_2, ...; mark it taken."""
        for candidate in preferred:
            if candidate not in self._taken:
                self._taken.add(candidate)
                return candidate
        candidate, n = base, 2
        while candidate in self._taken:
            candidate = f"{base}_{n}"
            n += 1
        self._taken.add(candidate)
        return candidate


def singular(word: str) -> str:
    """The type name of one item of a list named ``word``: ``Entities`` -> ``Entity``."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word + "Item"
