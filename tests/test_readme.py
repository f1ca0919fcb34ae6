"""The README's examples as written: shell and Python blocks run, the rest checked against the code.

Skipped, with the reason: blocks that need the network (``scripts/demo`` and the benchmarks
install packages from PyPI and npm) and blocks that start a cluster across machines. Everything else runs from the repository's root with
the environment of the quick start (``source .venv/bin/activate``: this interpreter's
``bin`` first on PATH).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NETWORK = ("scripts/demo", "pip install")
MACHINES = ("ray start",)  # a cluster of several machines: tests/host/cluster makes one locally

pytestmark = pytest.mark.timeout(180)


@dataclass(frozen=True)
class Block:
    """One fenced block of the README."""

    lang: str
    text: str
    line: int
    section: str

    @property
    def name(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")
        return f"{self.lang}-{slug}-line{self.line}"


def _blocks() -> list[Block]:
    blocks: list[Block] = []
    section = ""
    lines = README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        fence = re.match(r"```(\w+)\s*$", line)
        if fence:
            end = lines.index("```", i + 1)
            blocks.append(
                Block(fence.group(1), "\n".join(lines[i + 1 : end]) + "\n", i + 1, section)
            )
            i = end
        i += 1
    return blocks


BLOCKS = _blocks()


def _name(block: Block) -> str:
    return block.name


def _env() -> dict[str, str]:
    """The quick start's environment: the .venv activated (this interpreter's bin first)."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(Path(bin_dir).parent)
    env.pop("DSH_CODE_MCP_TOKEN", None)
    env.pop("PYTHONPATH", None)
    return env


def _of(lang: str) -> list[Block]:
    return [b for b in BLOCKS if b.lang == lang]


def _is_synopsis(block: Block) -> bool:
    return block.text.startswith("dsh-code run PROGRAM")


def test_the_readme_has_the_blocks_this_test_knows() -> None:
    assert {b.lang for b in BLOCKS} <= {"sh", "python", "json"}
    assert sum(_is_synopsis(b) for b in BLOCKS) == 1
    assert len(_of("sh")) >= 5 and len(_of("python")) >= 4


@pytest.mark.parametrize("block", [b for b in _of("sh") if not _is_synopsis(b)], ids=_name)
def test_a_shell_block_runs_as_written(block: Block) -> None:
    if any(marker in block.text for marker in NETWORK):
        pytest.skip("needs the network: installs packages from PyPI (and npm)")
    if any(marker in block.text for marker in MACHINES):
        pytest.skip("needs several machines: starts a Ray cluster across them")
    process = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", block.text],
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its background jobs too are ours to end
    )
    try:
        out, err = process.communicate(timeout=150)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever a failed block left running
        process.communicate()
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip(), "a README example should show something"


def _has_top_level_await(text: str) -> bool:
    return bool(re.search(r"^(await |async with |async for )", text, re.MULTILINE))


#: ``print(...)  # prints: TEXT``: what that line prints, checked (``...`` stands for anything).
_PRINTS = re.compile(r"#\s*prints:\s?(?P<text>.*)$")

#: Runs a script as ``python script.py`` would, recording what each of its lines prints.
_RECORDER = """
import builtins, io, json, runpy, sys

script, record = sys.argv[1], sys.argv[2]
sys.argv = [script]
printed = []
original = builtins.print

def recording_print(*args, **kwargs):
    frame = sys._getframe(1)
    if frame.f_code.co_filename == script and kwargs.get("file") is None:
        buffer = io.StringIO()
        original(*args, **{**kwargs, "file": buffer})
        printed.append([frame.f_lineno, buffer.getvalue()])
    return original(*args, **kwargs)

builtins.print = recording_print
try:
    runpy.run_path(script, run_name="__main__")
finally:
    with open(record, "w", encoding="utf-8") as file:
        json.dump(printed, file)
"""


def _expected_prints(text: str) -> dict[int, str]:
    """Line number -> the output its ``# prints:`` comment promises."""
    expected: dict[int, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        found = _PRINTS.search(line)
        if found:
            expected[number] = found["text"].rstrip()
    return expected


def _matches(expected: str, printed: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, printed, re.DOTALL) is not None


def test_the_prints_check_matches_with_ellipses() -> None:
    assert _expected_prints("x = 1\nprint(x)  # prints: 1 ... 3\n") == {2: "1 ... 3"}
    assert _matches("1 ... 3", "1 2 3") and not _matches("1 ... 3", "1 2 4")
    assert _matches("[1, 2]", "[1, 2]") and not _matches("[1, 2]", "[1, 2, 3]")


def _file_block(block: Block) -> Path | None:
    """The file a block says it is (its first line ``# examples/x.py``), if it says so."""
    found = re.fullmatch(
        r"# ((?:examples|benchmarks|scripts)/[\w./-]+\.py)", block.text.split("\n")[0]
    )
    return ROOT / found.group(1) if found else None


@pytest.mark.parametrize("block", _of("python"), ids=_name)
def test_a_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    first = block.text.splitlines()[0]
    excerpt = re.match(r"# (\S+) \(abridged\)", first)
    if excerpt:  # an excerpt of a file: each of its lines is in the file, in order
        source = (ROOT / excerpt.group(1)).read_text(encoding="utf-8").splitlines()
        at = 0
        for line in block.text.splitlines()[1:]:
            if not line.strip():
                continue
            assert line in source[at:], f"{line!r} is not in {excerpt.group(1)} (after line {at})"
            at = source.index(line, at) + 1
        return
    shown = _file_block(block)
    if shown is not None:  # the whole file, as it is: the block is what runs
        assert block.text.split("\n", 1)[1] == shown.read_text(encoding="utf-8")
        return
    # A script, as a user would save and run it: no notebook's top-level await.
    assert not _has_top_level_await(block.text), "top-level await: wrap it in a function"
    expected = _expected_prints(block.text)
    calls = sorted(
        {
            node.lineno
            for node in ast.walk(ast.parse(block.text))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
        }
    )
    unchecked = [n for n in calls if n not in expected]
    assert unchecked == [], f"lines {unchecked} print: say what, with '# prints: ...'"
    script = tmp_path / "example.py"
    script.write_text(block.text, encoding="utf-8")
    record = tmp_path / "printed.json"
    done = subprocess.run(
        [sys.executable, "-c", _RECORDER, str(script), str(record)],
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,  # a stdio server ends at EOF
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    printed: dict[int, str] = {}
    for number, text in json.loads(record.read_text(encoding="utf-8")):
        printed[number] = printed.get(number, "") + text
    for number, promise in expected.items():
        assert number in printed, f"line {number} printed nothing (promised {promise!r})"
        got = printed[number].rstrip("\n")
        assert _matches(promise, got), f"line {number} printed {got!r}, not {promise!r}"


@pytest.mark.parametrize("block", _of("json"), ids=_name)
def test_a_json_block_is_a_config_whose_files_exist(block: Block) -> None:
    config = json.loads(block.text)
    for name, server in config["mcpServers"].items():
        assert server["command"] == "dsh-code", name
        for arg in server["args"]:
            if arg.endswith((".py", ".json")):
                assert (ROOT / arg).is_file(), arg


def test_the_synopsis_names_only_options_that_exist() -> None:
    (synopsis,) = [b for b in BLOCKS if _is_synopsis(b)]
    command = ""
    for line in synopsis.text.splitlines():
        found = re.match(r"dsh-code (\w+)", line)
        if found:
            command = found.group(1)
        if not command or line.startswith("dsh-code --version"):
            continue
        done = subprocess.run(
            [sys.executable, "-m", "host.cli", command, "-h"],
            cwd=ROOT,
            env={**_env(), "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        for flag in re.findall(r"--[a-z][a-z-]*", line):
            assert flag in done.stdout, f"dsh-code {command} has no {flag}"


def test_no_reference_to_files_outside_the_repository() -> None:
    text = README.read_text(encoding="utf-8")
    assert "DESIGN.md" not in text and "STYLE.md" not in text
    for path in re.findall(r"`((?:examples|scripts|benchmarks|tests)/[\w./-]+)`", text):
        if path.startswith("benchmarks/results"):
            continue  # where the benchmarks write their report
        assert (ROOT / path).exists(), path
