"""Tests for the Python SDK text: escaping, layout, and validity under mypy --strict and ty."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import sdkgen
from sdkgen._manifest import clean_text
from tests.sdkgen.manifests import large, representative

NASTY = 'Ends with a quote " and has """ and \\ and \\n and \x00 and \r\n and ﬁ "'


def _methods(text: str) -> dict[str, ast.AsyncFunctionDef]:
    tree = ast.parse(text)
    return {n.name: n for n in tree.body if isinstance(n, ast.AsyncFunctionDef)}


def test_docstrings_survive_any_description() -> None:
    text = sdkgen.python_sdk([{"name": "t", "description": NASTY, "parameters": {}}])
    assert ast.get_docstring(_methods(text)["t"]) == clean_text(NASTY)
    assert "\x00" not in text


def test_layout_of_a_tool() -> None:
    text = sdkgen.python_sdk(representative())
    assert text.startswith("from typing import ")  # the instructions beside it say the rest
    assert (
        "async def import_() -> str:\n"
        ' """Keyword as a tool name; no parameters at all.\n'
        ' Returns: The import id."""\n'
    ) in text
    assert "\nasync def get_file_2() -> JsonValue: ...\n" in text
    assert "class ToolCallError(Exception):\n tool: str\n code: str\n message: str\n" in text


def test_tools_are_sorted_by_original_name() -> None:
    manifest = representative()
    names = sdkgen.python_names(manifest)
    methods = list(_methods(sdkgen.python_sdk(manifest)))
    assert [names[m] for m in methods] == sorted(t["name"] for t in manifest)


keys = st.text(min_size=1, max_size=8)
schemas = st.recursive(
    st.sampled_from([{"type": "string"}, {"type": "integer"}, {}, {"enum": ["a", 1, None]}]),
    lambda inner: st.one_of(
        st.builds(lambda i: {"type": "array", "items": i}, inner),
        st.builds(lambda p: {"type": "object", "properties": p}, st.dictionaries(keys, inner)),
        st.builds(lambda m: {"anyOf": m}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=6,
)
tools = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.text(min_size=1, max_size=10),
            "description": st.text(max_size=20),
            "inputSchema": st.builds(
                lambda p: {"type": "object", "properties": p}, st.dictionaries(keys, schemas)
            ),
        }
    ),
    unique_by=lambda t: str(t["name"]),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(tools)
def test_any_manifest_gives_parseable_python(manifest: list[dict[str, Any]]) -> None:
    text = sdkgen.python_sdk(manifest)
    methods = _methods(text)
    assert set(methods) == set(sdkgen.python_names(manifest))
    text.encode("utf-8")


SAMPLE_REPRESENTATIVE = """\
from rep_sdk import FilterArgs, SendMailArgs, ToolCallError
import rep_sdk as tools
import asyncio


async def program() -> object:
    page = await tools.read_file(path="/etc/hosts", encoding="utf-8", limit=None)
    first = page["lines"][0]["text"] if page["lines"] else ""
    mail: SendMailArgs = {"from": "a@b.c", "to": ["d@e.f"], "reply-to": None}
    await tools.send_mail(**mail)
    tree = await tools.tree(root={"name": "r", "children": [{"name": "c"}]}, depth=2)
    names = [node["name"] for node in tree["nodes"]]
    area = await tools.shape(shape={"kind": "circle", "center": {"x": 0, "y": 1}, "radius": 2})
    where: FilterArgs = {"field": "x", "and": [{"field": "y"}]}
    ids = await tools.filter(**where)
    n = await tools.import_()
    await tools.list_(items=["a"], page={"list": 1, "str": ["x"]})
    await tools.run(command="ls", color="auto")
    try:
        await tools.get_file(any="thing", goes=[1, 2])
    except ToolCallError as exc:
        return {"tool": exc.tool, "code": exc.code, "message": exc.message}
    got = await asyncio.gather(tools.get_file_2(), tools._2fa())
    return {"first": first, "names": names, "area": area["area"], "ids": ids, "n": n, "g": got}
"""
SAMPLE_LARGE = """\
from large_sdk import Entity
import large_sdk as tools


async def program() -> object:
    page = await tools.list_issue(owner="o", repo="r", state="open", per_page=50)
    titles = [item["title"] for item in page["items"]]
    issue: Entity = await tools.create_issue(
        owner="o", repo="r", title="t", options={"draft": True, "notify": {"channels": ["web"]}}
    )
    login = issue["user"]["login"]
    replies = [reply["id"] for reply in issue.get("thread", [])]
    gone = await tools.delete_release(owner="o", repo="r", release_number=3)
    return {"titles": titles, "login": login, "replies": replies, "deleted": gone["deleted"]}
"""
SAMPLE_BAD = """\
import large_sdk as tools


async def program() -> object:
    return await tools.list_isue(owner="o", repo=3)
"""


def test_sdk_and_sample_programs_pass_mypy_strict_and_ty(
    tmp_path: Path, mypy: Path, ty: Path
) -> None:
    (tmp_path / "rep_sdk.pyi").write_text(sdkgen.python_sdk(representative()), encoding="utf-8")
    (tmp_path / "large_sdk.pyi").write_text(sdkgen.python_sdk(large()), encoding="utf-8")
    (tmp_path / "sample_rep.py").write_text(SAMPLE_REPRESENTATIVE, encoding="utf-8")
    (tmp_path / "sample_large.py").write_text(SAMPLE_LARGE, encoding="utf-8")
    (tmp_path / "sample_bad.py").write_text(SAMPLE_BAD, encoding="utf-8")
    files = ["rep_sdk.pyi", "large_sdk.pyi", "sample_rep.py", "sample_large.py", "sample_bad.py"]
    ty_cmd = [str(ty), "check", "--output-format=concise", "--python-version=3.11"]
    mypy_cmd = [str(mypy), "--strict", "--no-incremental", "--python-version=3.11"]
    with subprocess.Popen(
        [*ty_cmd, "--color=never", *files], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    ) as ty_run:
        mypy_out = subprocess.run(
            [*mypy_cmd, *files], cwd=tmp_path, capture_output=True, text=True, check=False
        ).stdout
        ty_out = ty_run.communicate(timeout=60)[0]
    mypy_lines = [line for line in mypy_out.splitlines() if ": error:" in line]
    ty_lines = [line for line in ty_out.splitlines() if ": error[" in line]
    assert all(line.startswith("sample_bad.py:5:") for line in mypy_lines), mypy_out
    assert all(line.startswith("sample_bad.py:5:") for line in ty_lines), ty_out
    assert any("list_isue" in line for line in mypy_lines), mypy_out
    assert any("list_isue" in line for line in ty_lines), ty_out
