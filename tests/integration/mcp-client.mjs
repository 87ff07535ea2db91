// SPDX-License-Identifier: LGPL-2.1-or-later
// Drives `hutch mcp` with the real TypeScript SDK (Client and
// StdioClientTransport) for tests/integration/test_mcp.py.
//
//   node mcp-client.mjs SDK_DIR SPEC.json
//
// SDK_DIR is the installed @modelcontextprotocol/sdk package. SPEC is
// {"command": [argv...], "cwd": DIR, "env": {...}, "steps": [STEP...]}, a
// STEP {"op": "listTools"}, {"op": "ping"} or {"op": "call", "name": TOOL,
// "arguments": {...}}. Prints one JSON object: the server's info from
// initialize and, per step, {"ok": true, "result": ...} or {"ok": false,
// "error": MESSAGE, "code": CODE}.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, specPath] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(sdkDir, 'dist', 'esm', p)).href);
const { Client } = await load('client/index.js');
const { StdioClientTransport } = await load('client/stdio.js');

const spec = JSON.parse(readFileSync(specPath, 'utf8'));
const transport = new StdioClientTransport({
  command: spec.command[0],
  args: spec.command.slice(1),
  cwd: spec.cwd,
  env: spec.env,
  stderr: 'pipe',
});
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });

const client = new Client({ name: 'hutch-tests', version: '1.0.0' });
const out = { steps: [] };
try {
  await client.connect(transport);
  out.serverVersion = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.instructions = client.getInstructions();
  for (const step of spec.steps) {
    try {
      let result;
      if (step.op === 'listTools') {
        result = await client.listTools();
      } else if (step.op === 'ping') {
        result = await client.ping();
      } else if (step.op === 'call') {
        result = await client.callTool({ name: step.name, arguments: step.arguments },
                                       undefined, { timeout: 120000 });
      } else {
        throw new Error(`unknown step ${step.op}`);
      }
      out.steps.push({ ok: true, result });
    } catch (e) {
      out.steps.push({ ok: false, error: String(e.message), code: e.code ?? null });
    }
  }
} catch (e) {
  out.fatal = String(e.stack || e);
}
await client.close();
out.stderr = stderr;
console.log(JSON.stringify(out));
