"""Tests for the TypeScript SDK text: layout, escaping, and validity under tsc --strict."""

from __future__ import annotations

import subprocess
from pathlib import Path

import sdkgen
from tests.sdkgen.manifests import large, representative

SAMPLE_REPRESENTATIVE = """
async function program(): Promise<unknown> {
  const page = await tools.read_file({ path: "/etc/hosts", encoding: "utf-8", limit: null });
  const first = page.lines.length ? page.lines[0].text : "";
  await tools["send-mail"]({ from: "a@b.c", to: ["d@e.f"], "reply-to": null });
  const tree = await tools.tree({ root: { name: "r", children: [{ name: "c" }] }, depth: 2 });
  const area = await tools.shape({ shape: { kind: "circle", center: { x: 0, y: 1 }, radius: 2 } });
  const ids: number[] = await tools.filter({ field: "x", and: [{ field: "y" }] });
  const n: string = await tools.import();
  await tools.list({ items: ["a"], page: { list: 1, str: ["x"] } });
  await tools.run({ command: "ls", color: "auto" });
  try {
    await tools.get_file({ any: "thing", goes: [1, 2] });
  } catch (exc) {
    if (exc instanceof ToolCallError) return { tool: exc.tool, code: exc.code, m: exc.message };
  }
  const got = await Promise.all([tools["get.file"](), tools["2fa"]()]);
  return { first, names: tree.nodes.map((node) => node.name), area: area.area, ids, n, got };
}
"""
SAMPLE_LARGE = """
async function program(): Promise<unknown> {
  const page = await tools.list_issue({ owner: "o", repo: "r", state: "open", per_page: 50 });
  const titles = page.items.map((item) => item.title);
  const issue: Entity = await tools.create_issue({
    owner: "o", repo: "r", title: "t", options: { draft: true, notify: { channels: ["web"] } },
  });
  const replies = (issue.thread ?? []).map((reply) => reply.id);
  const gone = await tools.delete_release({ owner: "o", repo: "r", release_number: 3 });
  return { titles, login: issue.user.login, replies, deleted: gone.deleted };
}
"""
SAMPLE_BAD = """
async function program(): Promise<unknown> {
  return await tools.list_isue({ owner: "o", repo: 3 });
}
"""


def test_layout() -> None:
    text = sdkgen.typescript_sdk(representative())
    assert "declare const tools: {\n" in text
    assert '  "send-mail"(args: SendMailArgs): Promise<JsonValue>;\n' in text
    assert "  import(args?: Record<string, never>): Promise<string>;\n" in text
    assert "  run(args: { command: string; [key: string]: unknown }): Promise<JsonValue>;" in text
    assert '/** Send an e-mail. Quotes """ and \\ and *\\/ must survive. */' in text
    assert "  /**\n   * Read a text file.\n   *\n   * Lines are numbered from 1.\n" in text
    assert "   * path: Absolute path.\n" in text
    assert '  "reply-to"?: string | null;\n' in text
    assert "declare class ToolCallError extends Error {" in text


def test_tsc_accepts_the_sdk_and_sample_programs(tmp_path: Path, tsc: Path) -> None:
    # One tsc run: rep.ts is a script (its declarations are global, beside the DOM's);
    # large.ts and bad.ts are modules, so their `tools` do not clash with rep.ts's.
    cases = {
        "rep.ts": sdkgen.typescript_sdk(representative()) + SAMPLE_REPRESENTATIVE,
        "large.ts": sdkgen.typescript_sdk(large()) + SAMPLE_LARGE + "export {};\n",
        "bad.ts": sdkgen.typescript_sdk(large()) + SAMPLE_BAD + "export {};\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    command = [str(tsc), "--noEmit", "--strict", "--target", "es2022", "--skipLibCheck"]
    done = subprocess.run(
        [*command, *cases], cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False
    )
    errors = [line for line in done.stdout.splitlines() if ": error TS" in line]
    assert errors, done.stdout + done.stderr
    bad_line = sdkgen.typescript_sdk(large()).count("\n") + 3
    assert all(line.startswith(f"bad.ts({bad_line},") for line in errors), done.stdout
    assert any("list_isue" in line for line in errors), done.stdout
