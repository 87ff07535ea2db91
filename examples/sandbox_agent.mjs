// SPDX-License-Identifier: LGPL-2.1-or-later
// A SandboxAgent of the OpenAI Agents SDK whose tools run in hutch
// (docs/clients.md). With OPENAI_API_KEY set it asks the real model; the
// SCRIPTED=1 variant replays a fixed script (no network), as the tests do.
//
//   npm install @openai/agents@0.20.0 ./clients/typescript
//   SCRIPTED=1 node examples/sandbox_agent.mjs

import { Runner, setTracingDisabled } from "@openai/agents";
import { Manifest, SandboxAgent, filesystem, shell } from "@openai/agents/sandbox";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
import { HutchSandboxClient } from "hutch-client/agents";

const scripted = process.env.SCRIPTED === "1";
if (scripted) setTracingDisabled(true);
const model = scripted
  ? new ScriptedModel([
      [{ type: "apply_patch_call", callId: "p1", status: "completed",
         operation: { type: "create_file", path: "hello.py", diff: "+print('hello from hutch')\n" } }],
      [functionCall("exec_command", { cmd: "python3 hello.py" }, { callId: "e1" })],
      [assistantMessage("hello.py prints its greeting")],
    ])
  : undefined;

const agent = new SandboxAgent({
  name: "coder",
  instructions: "Write hello.py that prints a greeting, then run it.",
  capabilities: [shell(), filesystem()],
  defaultManifest: new Manifest({ entries: { "README.md": { type: "file", content: "# demo\n" } } }),
  ...(model ? { model } : {}),
});
const client = new HutchSandboxClient({ policy: { limits: { memory: "1g", pids: 256 } } });
try {
  const result = await new Runner().run(agent, "go", { sandbox: { client } });
  console.log(result.finalOutput);
} finally {
  await client.client?.close();
}
