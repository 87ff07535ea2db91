// SPDX-License-Identifier: LGPL-2.1-or-later
// HutchSandboxClient (clients/typescript/agents.js) with the real
// @openai/agents (pinned by test_client_agents.py), run with `node --test`.
// Environment: HUTCH_AGENTS (agents.js), HUTCH_BIN, HUTCH_SOCK,
// HUTCH_CANARY (a host file the caller can read).

import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { Runner, setTracingDisabled } from "@openai/agents";
import { Manifest, SandboxAgent, filesystem, shell } from "@openai/agents/sandbox";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";

const { HutchSandboxClient } = await import(process.env.HUTCH_AGENTS);
const { HutchClient } = await import(new URL("index.js", `file://${process.env.HUTCH_AGENTS}`).href);
const CANARY = process.env.HUTCH_CANARY;
setTracingDisabled(true);

const api = await HutchClient.connect({ socket: process.env.HUTCH_SOCK, hutch: process.env.HUTCH_BIN });
test.after(() => api.close());

test("the session interface, driven directly", async () => {
  const client = new HutchSandboxClient({ client: api });
  const manifest = new Manifest({
    entries: { "README.md": { type: "file", content: "hello\n" },
               src: { type: "dir", children: { "a.txt": { type: "file", content: "A" } } } },
    environment: { GREETING: "hi" },
  });
  const s = await client.create({ manifest });
  assert.equal(s.supportsPty(), true);  // tty and writeStdin: client-terminal.test.mjs

  let r = await s.exec({ cmd: 'printf "%s " "$GREETING"; pwd; cat README.md src/a.txt; exit 3' });
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "hi /workspace\nhello\nA");
  assert.match(await s.execCommand({ cmd: "echo out" }), /Process exited with code 0\nOutput:\nout\n$/);
  r = await s.exec({ cmd: "pwd", workdir: "src" });
  assert.equal(r.stdout, "/workspace/src\n");
  assert.equal(Buffer.from(await s.readFile({ path: "src/a.txt" })).toString(), "A");
  const names = (await s.listDir({ path: "." })).map((e) => `${e.name}:${e.type}`).sort();
  assert.deepEqual(names, ["README.md:file", "src:dir"]);
  assert.equal(await s.pathExists("README.md"), true);
  assert.equal(await s.pathExists("nope"), false);
  assert.equal(await s.directoryExists("src"), true);
  await s.materializeEntry({ path: "deep/er/f.txt", entry: { type: "file", content: "F" } });
  assert.equal(Buffer.from(await s.readFile({ path: "/workspace/deep/er/f.txt" })).toString(), "F");

  const ed = s.createEditor();
  await ed.createFile({ type: "create_file", path: "x.py", diff: "+print(1)\n" });
  await ed.updateFile({ type: "update_file", path: "x.py", diff: "@@\n-print(1)\n+print(2)\n" });
  assert.equal((await s.exec({ cmd: "python3 x.py || cat x.py" })).stdout.trim().slice(-1), "2");
  await ed.deleteFile({ type: "delete_file", path: "x.py" });
  assert.equal(await s.pathExists("x.py"), false);

  // Persist, hydrate into another session.
  const tar = await s.persistWorkspace();
  assert.ok(tar.length > 0);
  const s2 = await client.create({ manifest: new Manifest({}) });
  await s2.hydrateWorkspace(tar);
  assert.equal(Buffer.from(await s2.readFile({ path: "deep/er/f.txt" })).toString(), "F");
  await s2.delete();

  // Resume from serialised state.
  const saved = JSON.parse(JSON.stringify(await client.serializeSessionState(s.state)));
  await s.stop();
  const state = await client.deserializeSessionState(saved);
  const s3 = await client.resume(state);
  assert.equal((await s3.exec({ cmd: "cat README.md" })).stdout, "hello\n");

  // The canary: readable here, not in the sandbox.
  assert.match(fs.readFileSync(CANARY, "utf8"), /^canary/);
  r = await s3.exec({ cmd: `cat ${CANARY}` });
  assert.notEqual(r.exitCode, 0);
  assert.ok(!r.output.includes("secret"), r.output);

  await client.delete(s3.state);
  await assert.rejects(client.resume(state), (e) => e.code === "not_found");
  assert.ok(!fs.existsSync(s.state.hostDir));
});

function patchCall(callId, operation) {
  return { type: "apply_patch_call", callId, status: "completed", operation };
}

test("a SandboxAgent run with a scripted model", async () => {
  const client = new HutchSandboxClient({ client: api });
  const model = new ScriptedModel([
    // The SDK offers apply_patch as the hosted tool to a Responses-style
    // model (the scripted one): apply_patch_call items.
    [patchCall("c1", { type: "create_file", path: "calc.py",
                       diff: "+def add(a, b):\n+    return a - b\n" })],
    [patchCall("c2", { type: "update_file", path: "calc.py",
                       diff: "@@\n def add(a, b):\n-    return a - b\n+    return a + b\n" })],
    [functionCall("exec_command", { cmd: "python3 -c 'import calc; assert calc.add(2, 3) == 5; print(\"tests pass\")'" },
                  { callId: "c3" })],
    // A terminal session (supportsPty() is true): the command waits for a
    // line, write_stdin gives it one (session 1, the first of this session).
    [functionCall("exec_command", { cmd: "read line; echo got-$line", tty: true, yield_time_ms: 300 },
                  { callId: "c5" })],
    [functionCall("write_stdin", { session_id: 1, chars: "hello\n", yield_time_ms: 5000 },
                  { callId: "c6" })],
    [functionCall("exec_command", { cmd: `cat ${CANARY}; echo rc=$?` }, { callId: "c4" })],
    [assistantMessage("done: calc.add fixed")],
  ]);
  const agent = new SandboxAgent({ name: "fixer", instructions: "fix calc.py", model,
                                   capabilities: [shell(), filesystem()] });
  const calls = [];
  const spy = new Proxy(client, { get(t, k) {
    const v = Reflect.get(t, k);
    return typeof v === "function" ? (...a) => { calls.push(String(k)); return v.apply(t, a); } : v;
  } });
  const result = await new Runner().run(agent, "fix the add function", { sandbox: { client: spy } });
  assert.equal(result.finalOutput, "done: calc.add fixed");
  const outputs = result.newItems.filter((i) => i.type === "tool_call_output_item")
    .map((i) => JSON.stringify(i.output));
  assert.ok(outputs.some((o) => o.includes("tests pass")), outputs.join("\n"));
  assert.ok(outputs.some((o) => o.includes("got-hello")), outputs.join("\n"));
  const canaryOut = outputs.find((o) => o.includes("rc="));
  assert.ok(canaryOut && !canaryOut.includes("secret") && !canaryOut.includes("rc=0"), canaryOut);
  assert.ok(calls.includes("create"), calls);
  // The runtime stopped and deleted the session it created.
  assert.deepEqual(await api.list(), [], "the run deleted its sandbox");
});
