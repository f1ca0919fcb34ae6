"""Programs as agent frameworks write them: tools called positionally, the last expression kept.

A framework's model writes ``web_search("q")`` and ends a step with a bare expression (or an
assignment) whose value it reads back, whatever its type. The prelude (one line before the
program, its source an input) gives each tool its positional shape, restores variables the
framework sent, and the last bare expression or assigned value is kept as the step's output:
lossless JSON as it is, anything else as its ``str()`` (what the framework shows the model
anyway). A final answer that is not JSON crosses as smolagents' own remote executors send
it, through its safe serializer (JSON with type tags; never pickle). Tracebacks and syntax
errors are given back in the code's own lines and text (``Program.shown``).
"""

from __future__ import annotations

import ast
import base64
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = (
    "FINAL_ANSWER_SIGNAL",
    "NAMESPACE",
    "OUR_NAMES",
    "SAFE_ARGUMENT",
    "Program",
    "build_program",
    "jsonable",
    "program_inputs",
    "unshift",
)

#: Where the tools' bindings live in the child; the prelude puts wrappers under their names.
NAMESPACE: Final = "_dsh_tools"
_PRELUDE_INPUT: Final = "_dsh_prelude"
_VARIABLES_INPUT: Final = "_dsh_variables"
_SERIALIZER_INPUT: Final = "_dsh_serializer"
_LAST: Final = "_dsh_last"
_ASSIGNED: Final = f"{_LAST} = "
#: The one argument a final answer that is not JSON is sent in: the safe serializer's text.
SAFE_ARGUMENT: Final = "_dsh_safe"
#: The exception type a step ends with when it called ``final_answer``.
FINAL_ANSWER_SIGNAL: Final = "FinalAnswerSignal"
#: Globals of ours that a session may carry or drop without the model hearing of it.
OUR_NAMES: Final = frozenset(
    {
        NAMESPACE,
        _PRELUDE_INPUT,
        _VARIABLES_INPUT,
        _SERIALIZER_INPUT,
        _LAST,
        "_dsh_output",
        "_dsh_params",
        "_dsh_variables_out",
    }
)

_PRELUDE: Final = '''
def _dsh_setup(namespace, tools, final, blob, serializer):
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

    def is_json(value, depth=0):
        """Lossless JSON as it is (a cycle or deep nesting is not)."""
        if value is None or type(value) in (bool, int, str):
            return True
        if type(value) is float:
            return math.isfinite(value)
        if depth > 64:
            return False
        if type(value) is list:
            return all(is_json(item, depth + 1) for item in value)
        if type(value) is dict:
            return all(
                type(key) is str and is_json(item, depth + 1) for key, item in value.items()
            )
        return False

    loaded = {}

    def serializer_class():
        if not loaded:
            exec(compile(serializer, "<smolagents.serialization>", "exec"), loaded)
        return loaded["SafeSerializer"]

    def safe(named):
        """``named`` as smolagents' safe serializer writes it (raises if it cannot)."""
        if is_json(named):
            return named
        return {'_dsh_safe': serializer_class().dumps(named, allow_pickle=False)}

    def unsafe(value):
        """A tool's value as the host sent it: what is not JSON, read with the serializer."""
        if serializer and type(value) is dict and len(value) == 1 and '_dsh_safe' in value:
            return serializer_class().loads(value['_dsh_safe'], allow_pickle=False)
        return value

    def wrap(name, params, encode):
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
            return unsafe(binding(**encode(named)))

        tool.__name__ = tool.__qualname__ = name
        return tool

    for name, params in tools.items():
        encode = safe if name == final and serializer else to_json
        g[name] = wrap(name, params, encode)
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
        return value if is_json(value) else str(value)

    g["_dsh_output"] = output

    def variables():
        import types

        out = {}
        for key, value in list(g.items()):
            if key.startswith("_") or isinstance(value, (types.ModuleType, type)) or callable(value):
                continue
            if is_json(value):
                out[key] = value
        return out

    g["_dsh_variables_out"] = variables
'''

_LINE_REFS: Final = (
    re.compile(r'(?<=File "<program>", line )(\d+)'),
    re.compile(r"(?<=\(line )(\d+)"),
    re.compile(r"(?<=\(detected at line )(\d+)"),
    re.compile(r"(?m)(?<=^line )(\d+)(?=:)"),
)
#: A frame of the prelude's own wrappers, and the namespace our bindings live in.
_PRELUDE_FRAME: Final = re.compile(r'(?m)^  File "<prelude>", line \d+, in .*\n')


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


@dataclass(frozen=True)
class Program:
    """The text to run for a step's code, and how to show its failures in the code's terms."""

    text: str
    inserted_at: tuple[int, int] | None = None
    """Where ``_dsh_last = `` was put before the last expression: (line of ``text``, column)."""

    def shown(self, message: str) -> str:
        """``message`` (a failure or traceback) as it reads against the code as written."""
        message = _PRELUDE_FRAME.sub("", message).replace(f"{NAMESPACE}.", "")
        if self.inserted_at is not None:
            message = self._without_insertion(message)
        return unshift(message)

    def _without_insertion(self, message: str) -> str:
        """The traceback's copy of the last expression's line without ``_dsh_last = ``, and
        its carets moved back under the code they point at."""
        lineno, column = self.inserted_at or (0, 0)
        line = self.text.splitlines()[lineno - 1]
        start = column - (len(line) - len(line.lstrip()))  # where it went in the shown line
        header = f'  File "<program>", line {lineno}, in '
        out = message.splitlines(keepends=True)
        for i, text in enumerate(out[:-1]):
            if not text.startswith(header) or out[i + 1].strip() != line.strip():
                continue
            shown = out[i + 1]
            indent = len(shown) - len(shown.lstrip())
            cut = indent + start
            out[i + 1] = shown[:cut] + shown[cut + len(_ASSIGNED) :]
            if i + 2 < len(out) and out[i + 2].strip() and set(out[i + 2].strip()) <= set("~^"):
                carets = out[i + 2]
                out[i + 2] = carets[:cut] + carets[cut + len(_ASSIGNED) :]
        return "".join(out)


def _keep_last_value(code: str) -> tuple[str, tuple[int, int] | None]:
    """``code`` with its last bare expression assigned, or its last assignment's target read
    again, and kept (its lines as they were, one appended); where ``_dsh_last = `` went."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, None  # the runtime reports it, in the program's own lines
    if not tree.body:
        return code, None
    node = tree.body[-1]
    text = code if code.endswith("\n") else code + "\n"
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        # As LocalPythonExecutor does: the value assigned is the step's output.
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if isinstance(node, ast.AnnAssign) and node.value is None:
            return code, None
        return f"{text}_dsh_output(({ast.unparse(target)}))\n", None
    if not isinstance(node, ast.Expr):
        return code, None
    lines = code.splitlines(keepends=True)
    line = lines[node.lineno - 1]
    offset = len(line.encode()[: node.col_offset].decode())  # col_offset counts UTF-8 bytes
    lines[node.lineno - 1] = f"{line[:offset]}{_ASSIGNED}{line[offset:]}"
    text = "".join(lines)
    if not text.endswith("\n"):
        text += "\n"
    return f"{text}_dsh_output(globals().pop({_LAST!r}))\n", (node.lineno, offset)


def _keep_last_expression(code: str) -> str:
    """``code`` with its last value kept (see ``_keep_last_value``)."""
    return _keep_last_value(code)[0]


def build_program(code: str, final: str | None, *, epilogue: str = "") -> Program:
    """The program to run for ``code``: the prelude line, then ``code`` in its own lines + 1."""
    from runtime.lowlevel import HIDDEN_FILENAME  # the prelude's frames are left out

    setup = (
        f"exec(compile({_PRELUDE_INPUT}, {HIDDEN_FILENAME!r}, 'exec')); "
        f"_dsh_setup(globals().pop({NAMESPACE!r}, None), _dsh_params, {final!r}, "
        f"{_VARIABLES_INPUT}, {_SERIALIZER_INPUT}); "
        f"del _dsh_setup, _dsh_params, {_PRELUDE_INPUT}, {_VARIABLES_INPUT}, {_SERIALIZER_INPUT}"
    )
    if epilogue:
        return Program(f"{setup}\n{code.rstrip(chr(10))}\n{epilogue}")
    body, inserted = _keep_last_value(code)
    at = None if inserted is None else (inserted[0] + 1, inserted[1])
    return Program(f"{setup}\n{body}", at)


def program_inputs(
    params: Mapping[str, Sequence[str]], variables: Mapping[str, Any], serializer: str = ""
) -> dict[str, Any]:
    """The inputs that go with ``build_program``: the prelude, the tools' parameters, variables,
    and the safe serializer's source for a final answer that is not JSON."""
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
        _SERIALIZER_INPUT: serializer,
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
