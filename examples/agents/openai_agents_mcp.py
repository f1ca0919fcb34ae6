"""The OpenAI Agents SDK driving ``dsh-code mcp`` through ``MCPServerStdio``.

Run ``python examples/agents/openai_agents_mcp.py``: the agent gets dsh-code's
``run_code`` (its description carries the SDK of the tools in ``examples/fs_tools.py``)
from a ``dsh-code mcp`` subprocess. Without ``--model`` a scripted model (the SDK's own
``ScriptedModel``, no network) writes one program and then answers with its result; with
``--model gpt-...`` and ``OPENAI_API_KEY`` set, a real model does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call

EXAMPLES = Path(__file__).resolve().parent.parent
BINDINGS = EXAMPLES / "fs_tools.py"

PROGRAM = """
names = await tools.list_dir(path=".")
sizes = {}
for name in names:
    if name.endswith(".py"):
        sizes[name] = len(await tools.read_file(path=name))
return {"files": len(names), "python_sizes": sizes}
"""


def scripted_model() -> ScriptedModel:
    """A model that calls ``run_code`` once, then reports what the program returned."""
    return ScriptedModel(
        [
            [function_call("run_code", {"code": PROGRAM}, call_id="call-1")],
            [assistant_message("I listed the folder and measured its Python files.")],
        ]
    )


def dsh_code_server(directory: Path, *extra: str) -> MCPServerStdio:
    """``dsh-code mcp`` over stdio, serving the file tools rooted at ``directory``."""
    command = [sys.executable, "-m", "dsh_code", "mcp", "-b", str(BINDINGS), *extra]
    return MCPServerStdio(
        params={"command": command[0], "args": command[1:], "cwd": str(directory)},
        name="dsh-code",
        client_session_timeout_seconds=60,
    )


async def run(directory: Path, model: Any) -> tuple[str, Any]:
    """The agent's final answer, and the ``run_code`` output it saw."""
    async with dsh_code_server(directory) as server:
        agent = Agent(
            name="coder",
            instructions="Use run_code to answer; write one program that calls the tools.",
            mcp_servers=[server],
            model=model,
        )
        result = await Runner.run(
            agent,
            "How many files are here, and how big is each .py?",
            run_config=RunConfig(tracing_disabled=isinstance(model, ScriptedModel)),
        )
    outputs = [
        item.output
        for item in result.new_items
        if getattr(item, "type", "") == "tool_call_output_item"
    ]
    return str(result.final_output), outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real model (needs OPENAI_API_KEY); else scripted")
    parser.add_argument("--dir", type=Path, default=EXAMPLES, help="the folder the tools see")
    args = parser.parse_args()
    answer, outputs = asyncio.run(run(args.dir, args.model or scripted_model()))
    for output in outputs:
        print(json.dumps(output, indent=2) if not isinstance(output, str) else output)
    print(answer)


if __name__ == "__main__":
    main()
