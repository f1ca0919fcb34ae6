"""Programs as agent frameworks write them: tools called positionally, the last expression kept.

A framework's model writes ``web_search("q")`` and ends a step with a bare expression whose
value it reads back, whatever its type. The prelude (one line before the program, its
source an input) gives each tool its positional shape, restores variables the framework
sent, and the last bare expression is kept as the step's output: lossless JSON as it is,
anything else as its ``str()`` (what the framework shows the model anyway).
"""

from __future__ import annotations

import ast
import base64
import pickle
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = (
    "FINAL_ANSWER_SIGNAL",
    "NAMESPACE",
    "OUR_NAMES",
    "build_program",
    "jsonable",
    "program_inputs",
    "unshift",
)

#: Where the tools' bindings live in the child; the prelude puts wrappers under their names.
NAMESPACE: Final = "_dsh_tools"
_PRELUDE_INPUT: Final = "_dsh_prelude"
_VARIABLES_INPUT: Final = "_dsh_variables"
_LAST: Final = "_dsh_last"
#: The exception type a step ends with when it called ``final_answer``.
FINAL_ANSWER_SIGNAL: Final = "FinalAnswerSignal"
#: Globals of ours that a session may carry or drop without the model hearing of it.
OUR_NAMES: Final = frozenset(
    {
        NAMESPACE,
        _PRELUDE_INPUT,
        _VARIABLES_INPUT,
        _LAST,
        "_dsh_output",
        "_dsh_params",
        "_dsh_variables_out",
    }
)

_PRELUDE: Final = '''
def _dsh_setup(namespace, tools, final, blob):
    import base64
    import math
    import pickle

    g = globals()

    def to_json(value):
        if value is None or type(value) in (bool, int, str):
            return value
        if type(value) is float:
            return value if math.isfinite(value) else str(value)
        if isinstance(value, (list, tuple)):
            return [to_json(item) for item in value]
        if isinstance(value, dict) and all(type(key) is str for key in value):
            return {key: to_json(item) for key, item in value.items()}
        return str(value)

    def wrap(name, params):
        binding = getattr(namespace, name)

        def tool(*args, **kwargs):
            if len(args) > len(params):
                raise TypeError(
                    f"{name}() takes at most {len(params)} positional arguments "
                    f"({len(args)} given)"
                )
            named = dict(zip(params, args))
            for key in kwargs:
                if key in named:
                    raise TypeError(f"{name}() got multiple values for argument {key!r}")
            named.update(kwargs)
            return binding(**to_json(named))

        tool.__name__ = tool.__qualname__ = name
        return tool

    for name, params in tools.items():
        g[name] = wrap(name, params)
    if final is not None:
        answer_tool = g[final]

        class FinalAnswerSignal(BaseException):
            """final_answer() was called: the step ends here."""

        FinalAnswerSignal.__qualname__ = "FinalAnswerSignal"
        FinalAnswerSignal.__module__ = "builtins"

        def final_answer(*args, **kwargs):
            answer_tool(*args, **kwargs)
            raise FinalAnswerSignal

        final_answer.__name__ = final_answer.__qualname__ = final
        g[final] = final_answer
    if blob:
        g.update(pickle.loads(base64.b64decode(blob)))

    def output(value):
        if value is None:
            return None
        plain = to_json(value)
        return value if plain == value and type(plain) is type(value) else str(value)

    g["_dsh_output"] = output

    def variables():
        import types

        out = {}
        for key, value in list(g.items()):
            if key.startswith("_") or isinstance(value, (types.ModuleType, type)) or callable(value):
                continue
            plain = to_json(value)
            if plain == value and type(plain) is type(value):
                out[key] = value
        return out

    g["_dsh_variables_out"] = variables
'''

_LINE_REFS: Final = (
    re.compile(r'(?<=File "<program>", line )(\d+)'),
    re.compile(r"(?<=\(line )(\d+)"),
    re.compile(r"(?m)(?<=^line )(\d+)(?=:)"),
)


def jsonable(value: Any) -> Any:
    """``value`` as lossless JSON: tuples as lists, anything else that is not JSON as ``str``."""
    from runtime.lowlevel import json_problem

    if json_problem(value) is None:
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, dict) and all(type(key) is str for key in value):
        return {key: jsonable(item) for key, item in value.items()}
    if type(value) is float:
        return str(value)  # NaN, infinities
    return str(value)


def _keep_last_expression(code: str) -> str:
    """``code`` with its last bare expression assigned, and kept (same lines, one appended)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code  # the runtime reports it, in the program's own lines
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return code
    node = tree.body[-1]
    lines = code.splitlines(keepends=True)
    line = lines[node.lineno - 1]
    offset = len(line.encode()[: node.col_offset].decode())  # col_offset counts UTF-8 bytes
    lines[node.lineno - 1] = f"{line[:offset]}{_LAST} = {line[offset:]}"
    text = "".join(lines)
    if not text.endswith("\n"):
        text += "\n"
    return f"{text}_dsh_output(globals().pop({_LAST!r}))\n"


def build_program(code: str, final: str | None, *, epilogue: str = "") -> str:
    """The program to run for ``code``: the prelude line, then ``code`` in its own lines + 1."""
    from runtime.lowlevel import HIDDEN_FILENAME  # the prelude's frames are left out

    setup = (
        f"exec(compile({_PRELUDE_INPUT}, {HIDDEN_FILENAME!r}, 'exec')); "
        f"_dsh_setup({NAMESPACE}, _dsh_params, {final!r}, {_VARIABLES_INPUT}); "
        f"del _dsh_setup, _dsh_params, {_PRELUDE_INPUT}, {_VARIABLES_INPUT}, {NAMESPACE}"
    )
    body = _keep_last_expression(code) if not epilogue else code.rstrip("\n") + "\n" + epilogue
    return f"{setup}\n{body}"


def program_inputs(
    params: Mapping[str, Sequence[str]], variables: Mapping[str, Any]
) -> dict[str, Any]:
    """The inputs that go with ``build_program``: the prelude, the tools' parameters, variables."""
    blob = ""
    if variables:
        try:
            blob = base64.b64encode(pickle.dumps(dict(variables), protocol=5)).decode()
        except Exception as exc:
            raise ValueError(f"the variables cannot be sent to the program: {exc}") from exc
    return {
        _PRELUDE_INPUT: _PRELUDE,
        "_dsh_params": {name: list(names) for name, names in params.items()},
        _VARIABLES_INPUT: blob,
    }


def unshift(text: str) -> str:
    """``text`` (a message or traceback) in the lines of the code as written (prelude aside,
    the last expression's line without the name that keeps its value)."""
    for pattern in _LINE_REFS:
        text = pattern.sub(lambda m: str(max(int(m.group(1)) - 1, 1)), text)
    return _KEPT_LINE.sub(_unkeep, text)


#: A traceback's line of the kept last expression, with the caret line under it if any.
_KEPT_LINE: Final = re.compile(
    rf"(?m)^(?P<indent> +){_LAST} = (?P<rest>.*)$(?P<carets>\n {{{len(_LAST) + 3}}}[ ^~]*$)?"
)


def _unkeep(match: re.Match[str]) -> str:
    indent, rest = match.group("indent"), match.group("rest")
    carets = (match.group("carets") or "")[1 + len(_LAST) + 3 :]  # left, with the line
    if carets == indent + "^" * len(rest):
        carets = ""  # the whole line: Python shows no carets then
    return f"{indent}{rest}\n{carets}" if carets else f"{indent}{rest}"
