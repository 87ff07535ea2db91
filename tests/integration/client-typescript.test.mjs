// SPDX-License-Identifier: LGPL-2.1-or-later
// The TypeScript client (clients/typescript) against the real `hutch serve`,
// run with `node --test` by test_client_typescript.py as root or as the
// test user. Environment: HUTCH_CLIENT (the package's index.js), HUTCH_BIN,
// HUTCH_SOCK (a socket path in the test's state directory), HUTCH_WS (a
// workspace with host.txt), HUTCH_CANARY (a host file the user can read).

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { execFileSync, spawn } from "node:child_process";
import readline from "node:readline";
import { test } from "node:test";

const hutch = await import(process.env.HUTCH_CLIENT);
const { HutchClient } = hutch;
const BIN = process.env.HUTCH_BIN, SOCK = process.env.HUTCH_SOCK;
const WS = process.env.HUTCH_WS, CANARY = process.env.HUTCH_CANARY;

async function rejects(p, cls) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof cls, `${e} is not a ${cls.name}`);
    return e;
  }
  assert.fail(`did not throw ${cls.name}`);
}

test("the whole surface, with a server the client starts and stops", async () => {
  assert.ok(!fs.existsSync(SOCK));
  const c = await HutchClient.connect({ socket: SOCK, hutch: BIN });
  const server = c.server;
  assert.ok(server, "the client did not start a server");
  try {
    const v = await c.version();
    assert.equal(v.api_major, 1);
    assert.ok(v.api_minor >= 1);
    assert.ok((await c.routes()).some((r) => r.path === "/v1/sandboxes/{name}/exec"));
    const c2 = await HutchClient.connect({ socket: SOCK, hutch: BIN });
    assert.equal(c2.server, null);
    await c2.close();

    const sb = await c.create("tsc", { policy: { workspace: { path: WS, mode: "overlay" } } });
    const info = await sb.info();
    assert.equal(info.name, "tsc");
    assert.match(info.id, /^[0-9a-f]{16}$/);
    assert.deepEqual((await c.list()).map((s) => s.name), ["tsc"]);

    let r = await sb.exec(["sh", "-c", 'printf "%s" "$GREETING"; printf err >&2; exit 3'],
                          { env: { GREETING: "hi" } });
    assert.deepEqual([r.exitCode, r.outcome.reason, r.outcome.signal, r.ok], [3, "exited", null, false]);
    assert.equal(r.stdoutText, "hi");
    assert.equal(r.stderrText, "err");
    r = await sb.exec(["sh", "-c", "kill -9 $$"]);
    assert.deepEqual([r.outcome.signal, r.outcome.reason], [9, "signaled"]);
    r = await sb.exec(["cat"], { stdin: Buffer.from([0, 255, 1]) });
    assert.deepEqual([...r.stdout], [0, 255, 1]);
    r = await sb.exec(["pwd"], { cwd: "/tmp" });
    assert.equal(r.stdoutText, "/tmp\n");
    r = await sb.exec(["sleep", "30"], { timeoutMs: 200 });
    assert.equal(r.outcome.reason, "timeout");

    const evs = [];
    for await (const ev of sb.execStream(["sh", "-c", "echo one; echo two >&2; exit 4"])) evs.push(ev);
    assert.equal(evs.at(-1).outcome.exitCode, 4);
    const out = (s) => Buffer.concat(evs.filter((e) => e.stream === s).map((e) => e.data)).toString();
    assert.equal(out("stdout"), "one\n");
    assert.equal(out("stderr"), "two\n");
    // Leaving a stream early kills its command; the next call works.
    for await (const ev of sb.execStream(["sh", "-c", "echo start; sleep 60"])) {
      if (ev.stream) break;
    }
    assert.equal(typeof (await sb.execDetached(["sleep", "1"])), "number");

    await sb.writeFile("notes.txt", "hello\n", { mode: 0o600 });
    assert.equal((await sb.readFile("notes.txt")).toString(), "hello\n");
    const st = await sb.stat("notes.txt");
    assert.deepEqual([st.type, st.size, st.mode], ["file", 6, "0600"]);
    await sb.writeFile("/workspace/bin dat+1", Buffer.from([0, 1]), { mode: "0755" });
    const names = Object.fromEntries((await sb.listFiles("/workspace")).map((f) => [f.name, f]));
    assert.equal(names["bin dat+1"].mode, "0755");
    assert.ok(names["host.txt"]);
    assert.equal(await sb.exists("notes.txt"), true);
    // API 1.2: parents, mkdir, move, the recursive list.
    await sb.writeFile("deep/er/f.txt", "f", { parents: true });
    await sb.mkdir("deep/other", { mode: 0o700 });
    await rejects(sb.mkdir("deep/other"), hutch.Conflict);
    await sb.mkdir("deep/other", { parents: true });
    await sb.move("deep/er/f.txt", "deep/other/g.txt");
    await rejects(sb.move("notes.txt", "deep/other/g.txt"), hutch.Conflict);
    const tree = Object.fromEntries((await sb.listFiles("deep", { recursive: true }))
      .map((f) => [f.name, f.type]));
    assert.deepEqual(tree, { er: "dir", other: "dir", "other/g.txt": "file" });
    const one = (await sb.listFiles("deep", { recursive: true, depth: 1 })).map((f) => f.name);
    assert.deepEqual(one.sort(), ["er", "other"]);
    await sb.removeFile("notes.txt");
    assert.equal(await sb.exists("notes.txt"), false);
    const nf = await rejects(sb.readFile("nope.txt"), hutch.NotFound);
    assert.deepEqual([nf.status, nf.code], [404, "not_found"]);

    // The canary: readable here (the negative twin), not in the sandbox.
    assert.match(fs.readFileSync(CANARY, "utf8"), /^canary/);
    for (const p of [CANARY, "../../../../../" + CANARY, "/proc/1/root" + CANARY])
      await rejects(sb.readFile(p), hutch.ApiError);
    r = await sb.exec(["cat", CANARY]);
    assert.notEqual(r.exitCode, 0);
    assert.ok(!r.stdoutText.includes("canary"));

    assert.ok((await sb.diff()).some((ch) => ch.path === "bin dat+1"));
    assert.ok(!fs.existsSync(path.join(WS, "bin dat+1")));
    await sb.apply({ paths: ["bin dat+1"] });
    assert.deepEqual([...fs.readFileSync(path.join(WS, "bin dat+1"))], [0, 1]);
    assert.ok(Array.isArray(await sb.audit({ limit: 5 })));

    await sb.stop();
    assert.equal((await sb.info()).state, "stopped");
    await sb.snapshot("base");
    assert.ok((await c.snapshots()).includes("base"));
    await sb.writeFile("after.txt", "x");
    await sb.stop();
    await sb.restore("base");
    assert.equal(await sb.exists("after.txt"), false);
    const fork = await c.create("tsc2", { fromSnapshot: "base" });
    assert.notEqual((await fork.info()).parent, null);
    assert.equal((await rejects(c.removeSnapshot("base"), hutch.Conflict)).status, 409);
    await fork.delete();
    await sb.delete();
    await c.removeSnapshot("base");
    assert.deepEqual(await c.list(), []);
  } finally {
    await c.close();
  }
  assert.ok(server.exitCode !== null || server.signalCode !== null);
  await rejects(new HutchClient({ socket: SOCK }).version(), hutch.ConnectionFailed);
});

test("errors: typed API errors, no server, a stale socket, a wrong token", async () => {
  let e = await rejects(HutchClient.connect({ socket: SOCK, autostart: false }), hutch.ConnectionFailed);
  assert.match(e.message, /does not exist/);
  // A stale socket: bound, nobody listening (Node's own servers unlink
  // theirs on close, so Python leaves one behind).
  execFileSync("/usr/bin/python3", ["-c",
    "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()", SOCK]);
  e = await rejects(new HutchClient({ socket: SOCK }).version(), hutch.ConnectionFailed);
  assert.match(e.message, /stale/);
  fs.unlinkSync(SOCK);

  const c = await HutchClient.connect({ socket: SOCK, hutch: BIN });
  try {
    e = await rejects(c.create("Bad Name!"), hutch.InvalidArgument);
    assert.deepEqual([e.status, e.code, e.field], [400, "invalid_argument", "/name"]);
    e = await rejects(c.get("nosuch"), hutch.NotFound);
    assert.ok(e.apiMessage);
    await c.create("errs");
    assert.equal((await rejects(c.create("errs"), hutch.Conflict)).code, "conflict");
    e = await rejects(c.exec("errs", ["true"], { env: { "1BAD": "x" } }), hutch.InvalidArgument);
    assert.equal(e.field, "/env/1BAD");
    e = await rejects(c.exec("errs", ["true"], { cwd: "rel" }), hutch.InvalidArgument);
    assert.equal(e.field, "/cwd");
    await rejects(c.exec("errs", "true"), TypeError);
    await c.delete("errs");
  } finally {
    await c.close();
  }

  const tok = path.join(path.dirname(SOCK), "token");
  fs.writeFileSync(tok, "t".repeat(32) + "\n", { mode: 0o600, flag: "wx" });
  const p = spawn(BIN, ["serve", "--socket", SOCK, "--listen", "127.0.0.1:0", "--token-file", tok],
                  { stdio: ["ignore", "pipe", "inherit"] });
  let url;
  try {
    for await (const line of readline.createInterface({ input: p.stdout })) {
      if (line.startsWith("listening on tcp:")) {
        url = `http://127.0.0.1:${line.trim().split(":").at(-1)}`;
        break;
      }
    }
    assert.ok(url, "no tcp listener");
    assert.equal((await new HutchClient({ url, token: "t".repeat(32) }).version()).api_major, 1);
    e = await rejects(new HutchClient({ url, token: "w".repeat(32) }).version(), hutch.Unauthorized);
    assert.deepEqual([e.status, e.code], [401, "unauthorized"]);
    await rejects(new HutchClient({ url }).list(), hutch.Unauthorized);
  } finally {
    const gone = new Promise((res) => p.once("exit", res));
    p.kill("SIGTERM");
    await gone;
  }
  e = await rejects(new HutchClient({ url, token: "t".repeat(32) }).version(), hutch.ConnectionFailed);
  assert.match(e.message, /refused/);
});
