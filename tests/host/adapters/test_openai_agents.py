"""The OpenAI Agents SDK example: ``MCPServerStdio`` drives a real ``dsh-code mcp``, scripted model."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.host.adapters.support import children, left_behind

pytestmark = pytest.mark.timeout(120)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "agents" / "openai_agents_mcp.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("openai_agents_mcp", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_agent_runs_a_program_through_dsh_code_mcp(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    example = _example()
    model = example.scripted_model()
    before = children()
    answer, outputs = asyncio.run(example.run(tmp_path, model))
    assert answer == "I listed the folder and measured its Python files."
    (output,) = outputs
    text = output["text"] if isinstance(output, dict) else str(output)
    assert text.startswith("result:\n")
    assert json.loads(text.removeprefix("result:\n")) == {"files": 2, "python_sizes": {"a.py": 6}}
    # the model was offered run_code with the SDK of the bindings in its description
    (first, second) = model.calls
    offered = {tool.name: tool for tool in first.tools}
    assert "run_code" in offered
    assert "async def read_file(" in offered["run_code"].description
    assert "python_sizes" in json.dumps(second.input, default=str)  # it saw the result
    model.assert_complete()
    assert not left_behind(before), "dsh-code mcp or a child of it outlived the agent"
