// The official TypeScript MCP SDK's client against `dsh-code mcp` over stdio (run by test_server.py).
// node ts_client.mjs PYTHON BINDINGS WALL_MS: prints one JSON object with what the client saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { DEFAULT_REQUEST_TIMEOUT_MSEC } from "@modelcontextprotocol/sdk/shared/protocol.js";

const [python, bindings, wallMs] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "host.cli", "mcp", "-b", bindings, "--wall-ms", wallMs],
  env: { ...process.env },
  stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (chunk) => { stderr += chunk; });
const client = new Client({ name: "ts-test", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
const progress = [];
const runaway = await client.callTool(
  { name: "run_code", arguments: { code: "import time\ntime.sleep(60)" } },
  undefined,
  { onprogress: (p) => progress.push(p) },
);
const quick = await client.callTool({ name: "run_code", arguments: { code: "return 6 * 7" } });
await client.close();
console.log(JSON.stringify({
  defaultTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MSEC, tools, progress, runaway, quick, stderr,
}));
