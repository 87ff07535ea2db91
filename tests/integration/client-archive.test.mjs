// SPDX-License-Identifier: LGPL-2.1-or-later
// The TypeScript client's downloadTree/uploadTree (a tree as tar, GET/PUT
// .../files/archive) against the real `hutch serve`, run with `node --test`
// by test_client_archive.py with the environment of
// client-typescript.test.mjs (HUTCH_CLIENT, HUTCH_BIN, HUTCH_SOCK, HUTCH_WS).

import assert from "node:assert/strict";
import { test } from "node:test";

const { HutchClient, PermissionDenied, NotFound } = await import(process.env.HUTCH_CLIENT);
const BIN = process.env.HUTCH_BIN, SOCK = process.env.HUTCH_SOCK, WS = process.env.HUTCH_WS;

/* The names of a ustar stream's entries (no pax headers: short names). */
function names(tar) {
  const out = [];
  for (let off = 0; off + 512 <= tar.length; ) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const name = h.subarray(0, 100).toString("latin1").replace(/\0.*$/s, "");
    const size = parseInt(h.subarray(124, 136).toString("latin1").replace(/\0.*$/s, ""), 8) || 0;
    out.push(`${name}:${String.fromCharCode(h[156])}`);
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

/* A one-entry ustar stream: a regular file @name with @data. */
function oneFile(name, data) {
  const h = Buffer.alloc(512);
  h.write(name, 0, "latin1");
  h.write("0000644\0", 100, "latin1");
  h.write("0000000\0", 108, "latin1");
  h.write("0000000\0", 116, "latin1");
  h.write(data.length.toString(8).padStart(11, "0") + "\0", 124, "latin1");
  h.write("00000000000\0", 136, "latin1");
  h.write("        ", 148, "latin1");
  h[156] = "0".charCodeAt(0);
  h.write("ustar\0" + "00", 257, "latin1");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
  const body = Buffer.alloc(Math.ceil(data.length / 512) * 512);
  data.copy(body);
  return Buffer.concat([h, body, Buffer.alloc(1024)]);
}

test("downloadTree and uploadTree", async () => {
  const c = await HutchClient.connect({ socket: SOCK, hutch: BIN });
  try {
    const sb = await c.create("tst", { policy: { workspace: { path: WS, mode: "overlay" } } });
    try {
      const r = await sb.exec(["sh", "-c", "mkdir -p t/d && echo a > t/d/a && ln -s d/a t/l"]);
      assert.ok(r.ok, r.stderrText);
      const tar = await sb.downloadTree("t");
      assert.deepEqual(names(tar), ["d/:5", "d/a:0", "l:2"]);
      await sb.uploadTree("copy/t", tar, { parents: true });
      assert.equal((await sb.readFile("copy/t/d/a")).toString(), "a\n");
      assert.deepEqual(await sb.downloadTree("copy/t"), tar);
      await sb.uploadTree("copy/t", oneFile("new.txt", Buffer.from("new\n")));
      assert.equal((await sb.readFile("copy/t/new.txt")).toString(), "new\n");
      // The twin: a '..' entry is the typed error naming it, nothing written.
      const e = await sb.uploadTree("copy/t", oneFile("../escape", Buffer.from("x"))).then(
        () => assert.fail("accepted"), (err) => err);
      assert.ok(e instanceof PermissionDenied, String(e));
      assert.match(e.message, /entry '\.\.\/escape'/);
      assert.equal(await sb.exists("copy/escape"), false);
      await assert.rejects(sb.downloadTree("nowhere"), NotFound);
    } finally {
      await sb.delete();
    }
  } finally {
    await c.close();
  }
});
