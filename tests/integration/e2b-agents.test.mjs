// SPDX-License-Identifier: LGPL-2.1-or-later
// The OpenAI Agents SDK's E2B sandbox client (E2BSandboxClient of
// @openai/agents-extensions, pinned by test_e2b_agents.py) against
// `hutch serve --e2b`, run with `node --test`. Environment: the E2B SDK's
// own E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, E2B_API_KEY; HUTCH_CANARY
// (a host file the caller can read, the sandbox must not).

import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import { test } from "node:test";
import { Runner, setTracingDisabled } from "@openai/agents";
import { Manifest, SandboxAgent, shell } from "@openai/agents/sandbox";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
import { E2BSandboxClient } from "@openai/agents-extensions/sandbox/e2b";
import { Sandbox } from "e2b";

const CANARY = process.env.HUTCH_CANARY;
// The host base's / is the host's, read-only: the workspace goes under
// E2B's home (docs/e2b.md "Templates").
const ROOT = "/home/user/workspace";
setTracingDisabled(true);

// GET / with Host @host at envd's address: how a sandbox port is reached
// locally (docs/e2b.md "Sandbox ports by Host").
function getByHost(host) {
  const u = new URL(process.env.E2B_SANDBOX_URL);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: u.hostname, port: u.port, path: "/", headers: { host } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("error", reject);
  });
}

async function untilServed(host) {
  let r;
  for (let i = 0; i < 300; i++) {
    r = await getByHost(host);
    if (r.status === 200) return r;
    await new Promise((ok) => setTimeout(ok, 100));
  }
  throw new Error(`nothing answered at ${host}: ${r.status} ${r.body}`);
}

test("the E2B session interface, driven directly", async () => {
  const client = new E2BSandboxClient({ timeout: 300, exposedPorts: [8000], pauseOnExit: true });
  const manifest = new Manifest({
    root: ROOT,
    entries: { "README.md": { type: "file", content: "hello\n" },
               src: { type: "dir", children: { "a.txt": { type: "file", content: "A" } } } },
    environment: { GREETING: "hi" },
  });
  const s = await client.create({ manifest });
  const id = s.state.sandboxId;
  assert.match(id, /^[a-z0-9]{20}$/);
  assert.equal((await Sandbox.list().nextItems()).filter((x) => x.sandboxId === id).length, 1);

  // exec: the manifest's environment, its root as the working directory,
  // the exit code.
  let out = await s.execCommand({ cmd: 'printf "%s " "$GREETING"; pwd; cat README.md src/a.txt; exit 3' });
  assert.match(out, /Process exited with code 3\nOutput:\nhi \/home\/user\/workspace\nhello\nA/);
  out = await s.execCommand({ cmd: "pwd", workdir: "src" });
  assert.match(out, /code 0\nOutput:\n\/home\/user\/workspace\/src\n/);

  // files: read, write (materializeEntry: files.write), exists, the editor.
  assert.equal(Buffer.from(await s.readFile({ path: "src/a.txt" })).toString(), "A");
  await s.materializeEntry({ path: "deep/er/f.txt", entry: { type: "file", content: "F" } });
  assert.equal(Buffer.from(await s.readFile({ path: `${ROOT}/deep/er/f.txt` })).toString(), "F");
  assert.equal(await s.pathExists("deep/er/f.txt"), true);
  assert.equal(await s.pathExists("nope"), false);
  assert.equal(await s.directoryExists("deep"), true);
  const ed = s.createEditor();
  await ed.createFile({ type: "create_file", path: "x.py", diff: "+print(1)\n" });
  await ed.updateFile({ type: "update_file", path: "x.py", diff: "@@\n-print(1)\n+print(2)\n" });
  assert.match(await s.execCommand({ cmd: "python3 x.py" }), /Output:\n2\n/);
  await ed.deleteFile({ type: "delete_file", path: "x.py" });
  assert.equal(await s.pathExists("x.py"), false);

  // An exposed port: getHost's name, relayed by Host to a server in the
  // sandbox. The SDK reports E2B's cloud form (TLS on 443); locally the
  // same host name is served over plain HTTP by the listeners.
  // The server runs in a tty session (exec_command's tty: true), which
  // outlives the call: a foreground exec's children end with it on hutch
  // (docs/e2b.md "The OpenAI Agents SDK").
  await s.execCommand({ cmd: "mkdir -p www && echo served > www/index.html" });
  out = await s.execCommand({ cmd: "cd www && exec python3 -m http.server 8000 --bind 127.0.0.1",
                              tty: true, yieldTimeMs: 300 });
  assert.match(out, /Process running with session ID \d+/, out);
  const session = Number(out.match(/session ID (\d+)/)[1]);
  const ep = await s.resolveExposedPort(8000);
  assert.equal(ep.host, `8000-${id}.${process.env.E2B_DOMAIN}`);
  const served = await untilServed(ep.host).catch(async (e) => {
    const more = await s.writeStdin({ sessionId: session, chars: "", yieldTimeMs: 100 });
    throw new Error(`${e.message}; the server's terminal: ${out} ${more}`);
  });
  assert.equal(served.body, "served\n");
  // Negative twin: a port where nothing listens is 502, not some other
  // service.
  assert.equal((await getByHost(`8001-${id}.${process.env.E2B_DOMAIN}`)).status, 502);

  // The wall: a host file the caller can read is not in the sandbox.
  assert.match(fs.readFileSync(CANARY, "utf8"), /^canary/);
  out = await s.execCommand({ cmd: `cat ${CANARY}; echo rc=$?` });
  assert.ok(!out.includes("secret") && !out.includes("rc=0\n"), out);

  // Pause (pauseOnExit: close() pauses) and resume from serialised state:
  // the files are kept (the processes are not: hutch keeps no memory).
  const saved = JSON.parse(JSON.stringify(await client.serializeSessionState(s.state)));
  await s.close();
  assert.equal((await Sandbox.getInfo(id)).state, "paused");
  const s2 = await client.resume(await client.deserializeSessionState(saved));
  assert.equal(s2.state.sandboxId, id, "resumed, not recreated");
  assert.equal((await Sandbox.getInfo(id)).state, "running");
  assert.match(await s2.execCommand({ cmd: "cat deep/er/f.txt" }), /Output:\nF/);

  // Delete: the sandbox is gone.
  s2.state.pauseOnExit = false;
  await s2.delete();
  assert.equal((await Sandbox.list().nextItems()).filter((x) => x.sandboxId === id).length, 0);
  await assert.rejects(Sandbox.getInfo(id));
});

test("a SandboxAgent run on E2B with a scripted model", async () => {
  const client = new E2BSandboxClient({ timeout: 300 });
  const model = new ScriptedModel([
    [functionCall("exec_command", { cmd: "echo the-agent-ran > out.txt && cat out.txt" }, { callId: "c1" })],
    [functionCall("exec_command", { cmd: `cat ${CANARY}; echo rc=$?` }, { callId: "c2" })],
    [assistantMessage("done")],
  ]);
  const agent = new SandboxAgent({ name: "e2b", instructions: "run it", model, capabilities: [shell()],
                                   defaultManifest: new Manifest({ root: ROOT }) });
  const before = new Set((await Sandbox.list().nextItems()).map((x) => x.sandboxId));
  const result = await new Runner().run(agent, "go", { sandbox: { client } });
  assert.equal(result.finalOutput, "done");
  const outputs = result.newItems.filter((i) => i.type === "tool_call_output_item")
    .map((i) => JSON.stringify(i.output));
  assert.ok(outputs.some((o) => o.includes("the-agent-ran")), outputs.join("\n"));
  const canaryOut = outputs.find((o) => o.includes("rc="));
  assert.ok(canaryOut && !canaryOut.includes("secret") && !canaryOut.includes("rc=0"), canaryOut);
  // The runtime deleted the sandbox it made.
  const after = (await Sandbox.list().nextItems()).filter((x) => !before.has(x.sandboxId));
  assert.deepEqual(after, []);
});
