// SPDX-License-Identifier: LGPL-2.1-or-later
// The TypeScript client's kept connection, run by test_client_keepalive.py:
//   node client_keepalive_check.mjs INDEX_JS SOCKET MODE [SANDBOX]
// MODE "fake-idle": a server that closes each connection after one answer
// (as an idle timeout would): every call still succeeds, once retried.
// MODE "fake-cut": the second answer is cut: ConnectionFailed, not retried.
// MODE "real": against hutch serve: three calls on one connection, and
// publishPort/unpublishPort on SANDBOX. MODE "stdin": writeStdin to a
// detached `cat` in SANDBOX. Prints one JSON line.
const [lib, sock, mode, name] = process.argv.slice(2);
const { HutchClient, ConnectionFailed } = await import(lib);
const c = new HutchClient({ socket: sock });
const out = { mode };
try {
  if (mode === "fake-idle") {
    out.versions = [];
    for (let i = 0; i < 3; i++) out.versions.push((await c.version()).api_major);
  } else if (mode === "fake-cut") {
    out.first = (await c.version()).api_major;
    try {
      await c.version();
      out.second = "answered";
    } catch (e) {
      out.second = e instanceof ConnectionFailed ? "ConnectionFailed" : String(e);
    }
    out.third = (await c.version()).api_major;
  } else if (mode === "stdin") {
    const id = await c.execDetached(name, ["cat"], { stdinOpen: true });
    await c.writeStdin(name, id, "from ");
    await c.writeStdin(name, id, Buffer.from("node\n"), { close: true });
    out.exit = (await c.wait(name, id)).exitCode;
    const chunks = [];
    for await (const ev of c.output(name, id)) if (ev.stream === "stdout") chunks.push(ev.data);
    out.stdout = Buffer.concat(chunks).toString();
    try {
      await c.writeStdin(name, id, "late");
    } catch (e) {
      out.late = `${e.constructor.name} ${e.status}`;
    }
  } else {
    for (let i = 0; i < 3; i++) await c.version();
    out.reused = c.connections === 1;
    const p = await c.publishPort(name, 8000);
    out.published = p;
    out.listed = await c.ports(name);
    await c.unpublishPort(name, 8000);
    out.after = await c.ports(name);
    try {
      await c.unpublishPort(name, 8000);
    } catch (e) {
      out.again = `${e.constructor.name} ${e.status}`;
    }
  }
} finally {
  out.connections = c.connections;
  await c.close();
}
console.log(JSON.stringify(out));
