// SPDX-License-Identifier: LGPL-2.1-or-later
// The exec WebSocket from the TypeScript client (terminal.js: a WebSocket
// client of its own over the unix socket), ports, and HutchSandboxClient's
// tty sessions, writeStdin and resolveExposedPort with the real
// @openai/agents, run with `node --test` by test_client_terminal.py.
// Environment: HUTCH_AGENTS (agents.js), HUTCH_BIN, HUTCH_SOCK.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Manifest } from "@openai/agents/sandbox";

const { HutchSandboxClient } = await import(process.env.HUTCH_AGENTS);
const { HutchClient, NotFound, ConnectionFailed } =
  await import(new URL("index.js", `file://${process.env.HUTCH_AGENTS}`).href);

const api = await HutchClient.connect({ socket: process.env.HUTCH_SOCK, hutch: process.env.HUTCH_BIN });
test.after(() => api.close());

test("the client's terminal: stdin, a pty, resize, signal, errors", async () => {
  const sb = await api.create("term");
  try {
    // Without a terminal: stdin relayed, closed, the outcome.
    let t = await sb.terminal(["sh", "-c", "read a; echo got:$a; echo err >&2; exit 3"]);
    assert.ok((await t.started) > 0);
    t.write("line\n");
    const done = await t.done;
    assert.equal(done.exitCode, 3);
    const out = t.takeOutput().toString();
    assert.match(out, /got:line/);
    assert.match(out, /err/);
    t.close();
    // A terminal of the size asked, resized; Ctrl-C interrupts.
    // Ctrl-C's target has SIGINT at its default before it says "ready", so
    // the kernel ends it (a handler that only sets a flag, as dash's and
    // Python's do, can miss a SIGINT that lands just before a blocking call).
    t = await sb.terminal(["sh", "-c", "stty size; read x; stty size; exec python3 -c " +
                           "'import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); " +
                           "print(\"ready\", flush=True); time.sleep(60)'"],
                          { tty: true, cols: 100, rows: 30 });
    await t.started;
    while (!/30 100/.test(t.takeOutput().toString())) await t.waitOutput(5000);
    t.resize(90, 20);
    t.write("\n");
    let seen = "";
    while (!/20 90/.test(seen) || !/ready/.test(seen)) { await t.waitOutput(5000); seen += t.takeOutput().toString(); }
    t.write("\u0003");
    const end = await t.done;
    assert.notEqual(end.exitCode, 0);
    t.close();
    // The API's refusal is the typed error.
    await assert.rejects(api.terminal("no-such-sandbox", ["true"]), NotFound);
    const dead = new HutchClient({ socket: "/nonexistent/hutch.sock" });
    await assert.rejects(dead.terminal("term", ["true"]), ConnectionFailed);
    // Ports: none published; over the unix socket no preview URL.
    assert.deepEqual(await sb.ports(), []);
    assert.equal(sb.previewUrl(8080), null);
    assert.equal(new HutchClient({ url: "http://127.0.0.1:7777", token: "t" }).previewUrl("x y", 3000),
                 "http://127.0.0.1:7777/v1/sandboxes/x%20y/ports/3000/");
  } finally {
    await sb.delete();
  }
});

test("HutchSandboxClient: tty sessions with writeStdin, resolveExposedPort", async () => {
  const client = new HutchSandboxClient({ client: api });
  const s = await client.create({ manifest: new Manifest({}), options: { exposedPorts: [8080] } });
  try {
    assert.equal(s.supportsPty(), true);
    // A shell waiting for a line: a session; writeStdin answers it.
    let r = await s.exec({ cmd: 'printf "name? "; read n; echo "hi $n"', tty: true, yieldTimeMs: 1500 });
    assert.equal(typeof r.sessionId, "number", JSON.stringify(r));
    assert.equal(r.exitCode, undefined);
    assert.match(r.output, /name\? /);
    let out = await s.writeStdin({ sessionId: r.sessionId, chars: "bob\n", yieldTimeMs: 10000 });
    assert.match(out, /hi bob/);
    assert.match(out, /Process exited with code 0/);
    out = await s.writeStdin({ sessionId: r.sessionId, chars: "x" });
    assert.match(out, /session not found/);
    // A terminal indeed, and a quick command ends within the yield.
    r = await s.exec({ cmd: "test -t 0 && echo on-a-tty", tty: true, yieldTimeMs: 10000 });
    assert.equal(r.exitCode, 0);
    assert.match(r.output, /on-a-tty/);
    // Ctrl-C through writeStdin interrupts the foreground job.
    r = await s.exec({ cmd: "sleep 60", tty: true, yieldTimeMs: 300 });
    out = await s.writeStdin({ sessionId: r.sessionId, chars: "\u0003", yieldTimeMs: 10000 });
    assert.match(out, /Process exited with code/);
    // The published port, as bound once it runs.
    const ep = await s.resolveExposedPort(8080);
    assert.equal(ep.host, "127.0.0.1");
    assert.ok(ep.port > 0, JSON.stringify(ep));
    assert.deepEqual(s.state.exposedPorts["8080"], ep);
    // Not published, and no preview URL over the unix socket: refused.
    await assert.rejects(s.resolveExposedPort(9090), /not published/);
  } finally {
    await s.delete();
  }
});
