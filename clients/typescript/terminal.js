// SPDX-License-Identifier: LGPL-2.1-or-later
// The exec WebSocket of `hutch serve` (docs/api.md, "The exec WebSocket"):
// a command with its stdin open and, asked for, a terminal. A WebSocket
// client (RFC 6455) of its own on node:net, over the unix socket or TCP:
// the handshake with its Sec-WebSocket-Accept check, masked client frames,
// fragmented messages, ping/pong and the close handshake.

import { createHash, randomBytes } from "node:crypto";
import net from "node:net";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const HEAD_MAX = 16 << 10;
const MESSAGE_MAX = 1 << 20;

/** A command running behind an exec WebSocket. `started` resolves to its
 * exec id, `done` to `{exitCode, outcome}` (or rejects with the server's
 * error); its output accumulates until takeOutput(). */
export class Terminal {
  #sock;
  #buf = Buffer.alloc(0);
  #frags = [];
  #fragOp = 0;
  #closed = false;
  #chunks = [];
  #waiters = [];

  constructor(sock, leftover, errors) {
    this.#sock = sock;
    this.id = null;
    this.exitCode = null;
    this.outcome = null;
    this.finished = false;
    this.started = new Promise((res, rej) => { this.#startRes = res; this.#startRej = rej; });
    this.done = new Promise((res, rej) => { this.#doneRes = res; this.#doneRej = rej; });
    this.started.catch(() => {});
    this.done.catch(() => {});
    this.#errors = errors;
    sock.on("data", (d) => this.#onData(d));
    sock.on("error", (e) => this.#fail(new errors.ConnectionFailed(`exec WebSocket: ${e.message}`)));
    sock.on("close", () => this.#fail(new errors.ConnectionFailed("exec WebSocket closed before the outcome")));
    if (leftover.length) this.#onData(leftover);
  }

  #startRes; #startRej; #doneRes; #doneRej; #errors;

  /** Sends @data (a string or bytes) to the command's stdin (its keys). */
  write(data) { this.#send(2, Buffer.from(data)); }
  resize(cols, rows) { this.#sendJson({ type: "resize", cols, rows }); }
  signal(signal) { this.#sendJson({ type: "signal", signal }); }
  closeStdin() { this.#sendJson({ type: "close_stdin" }); }

  /** The output since the last call, stdout (or the terminal) and stderr
   * interleaved as they came. */
  takeOutput() {
    const out = Buffer.concat(this.#chunks.map((c) => c.data));
    this.#chunks = [];
    return out;
  }

  /** Resolves once new output came, the command ended, or @ms passed. */
  waitOutput(ms) {
    if (this.#chunks.length || this.finished) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.#waiters.push(() => { clearTimeout(t); resolve(); });
    });
  }

  /** Resolves when the command ended or @ms passed (true if it ended). */
  async waitDone(ms) {
    if (this.finished) return true;
    let t;
    const timeout = new Promise((resolve) => { t = setTimeout(() => resolve(false), ms); });
    const r = await Promise.race([this.done.then(() => true, () => true), timeout]);
    clearTimeout(t);
    return r;
  }

  /** Closes the WebSocket: a command still running is killed. */
  close() {
    if (!this.#closed) {
      this.#closed = true;
      const p = Buffer.alloc(2);
      p.writeUInt16BE(1000);
      try { this.#send(8, p); } catch { /* gone already */ }
    }
    this.#sock.end();
  }

  #sendJson(o) { this.#send(1, Buffer.from(JSON.stringify(o))); }

  #send(op, payload) {
    if (this.#sock.destroyed) throw new this.#errors.ConnectionFailed("exec WebSocket is closed");
    const mask = randomBytes(4);
    const n = payload.length;
    const head = n < 126 ? Buffer.alloc(6) : n < 65536 ? Buffer.alloc(8) : Buffer.alloc(14);
    head[0] = 0x80 | op;
    if (n < 126) head[1] = 0x80 | n;
    else if (n < 65536) { head[1] = 0x80 | 126; head.writeUInt16BE(n, 2); }
    else { head[1] = 0x80 | 127; head.writeBigUInt64BE(BigInt(n), 2); }
    mask.copy(head, head.length - 4);
    const body = Buffer.alloc(n);
    for (let i = 0; i < n; i++) body[i] = payload[i] ^ mask[i & 3];
    this.#sock.write(Buffer.concat([head, body]));
  }

  #fail(e) {
    if (this.finished) return;
    this.finished = true;
    this.#startRej(e);
    this.#doneRej(e);
    this.#wake();
  }

  #wake() {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  #onData(d) {
    this.#buf = Buffer.concat([this.#buf, d]);
    for (;;) {
      const b = this.#buf;
      if (b.length < 2) return;
      let n = b[1] & 0x7f, off = 2;
      if (b[1] & 0x80) return this.#fail(new this.#errors.ConnectionFailed("a masked frame from the server"));
      if (n === 126) { if (b.length < 4) return; n = b.readUInt16BE(2); off = 4; }
      else if (n === 127) { if (b.length < 10) return; n = Number(b.readBigUInt64BE(2)); off = 10; }
      if (n > MESSAGE_MAX) return this.#fail(new this.#errors.ConnectionFailed("a frame over 1 MiB"));
      if (b.length < off + n) return;
      const fin = (b[0] & 0x80) !== 0, op = b[0] & 0x0f;
      const payload = b.subarray(off, off + n);
      this.#buf = b.subarray(off + n);
      if (op >= 8) this.#control(op, payload);
      else {
        if (op !== 0) this.#fragOp = op;
        this.#frags.push(Buffer.from(payload));
        if (fin) {
          const msg = Buffer.concat(this.#frags);
          this.#frags = [];
          this.#message(this.#fragOp, msg);
        }
      }
    }
  }

  #control(op, payload) {
    if (op === 9) this.#send(10, payload);
    else if (op === 8) {
      if (!this.#closed) {
        this.#closed = true;
        try { this.#send(8, payload.subarray(0, 2)); } catch { /* gone */ }
      }
      this.#sock.end();
      this.#fail(new this.#errors.ConnectionFailed("exec WebSocket closed before the outcome"));
    }
  }

  #message(op, msg) {
    if (op === 2) {
      if (msg.length < 1) return;
      this.#chunks.push({ stream: msg[0] === 2 ? "stderr" : "stdout", data: msg.subarray(1) });
      this.#wake();
      return;
    }
    const m = JSON.parse(msg.toString("utf8"));
    if (m.type === "started") {
      this.id = m.id;
      this.#startRes(m.id);
    } else if (m.type === "outcome") {
      this.exitCode = m.exit_code;
      this.outcome = m.outcome;
      this.finished = true;
      this.#startRes(this.id);
      this.#doneRes({ exitCode: m.exit_code, outcome: m.outcome });
      this.#wake();
    } else if (m.type === "error") {
      const e = new this.#errors.ApiError(500, "exec_failed", m.message, null);
      this.#fail(e);
    }
  }
}

/** Opens GET @path as a WebSocket on @where ({socket} or {host, port},
 * plus {token}) and sends @request as the first message. */
export async function openTerminal(where, path, request, errors) {
  const sock = where.socket ? net.connect(where.socket) : net.connect(where.port, where.host);
  await new Promise((resolve, reject) => {
    sock.once("connect", resolve);
    sock.once("error", (e) => reject(new errors.ConnectionFailed(
      `cannot reach hutch serve at ${where.socket ? "unix:" + where.socket : where.host + ":" + where.port}: ${e.message}`)));
  });
  const key = randomBytes(16).toString("base64");
  sock.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n` +
             `Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\n` +
             (where.token ? `Authorization: Bearer ${where.token}\r\n` : "") + "\r\n");
  const { status, headers, rest } = await readHead(sock, errors);
  if (status !== 101) {
    const len = Number(headers["content-length"] ?? 0);
    const body = await readBody(sock, rest, len);
    sock.destroy();
    throw errors.errorFromBody(status, body);
  }
  const accept = createHash("sha1").update(key + GUID).digest("base64");
  if (headers["sec-websocket-accept"] !== accept) {
    sock.destroy();
    throw new errors.ConnectionFailed("exec WebSocket: a wrong Sec-WebSocket-Accept");
  }
  const t = new Terminal(sock, rest, errors);
  sock.write(frameText(JSON.stringify(request)));
  return t;
}

function frameText(s) {
  const payload = Buffer.from(s);
  const mask = randomBytes(4), n = payload.length;
  const head = n < 126 ? Buffer.alloc(6) : n < 65536 ? Buffer.alloc(8) : Buffer.alloc(14);
  head[0] = 0x81;
  if (n < 126) head[1] = 0x80 | n;
  else if (n < 65536) { head[1] = 0x80 | 126; head.writeUInt16BE(n, 2); }
  else { head[1] = 0x80 | 127; head.writeBigUInt64BE(BigInt(n), 2); }
  mask.copy(head, head.length - 4);
  const body = Buffer.alloc(n);
  for (let i = 0; i < n; i++) body[i] = payload[i] ^ mask[i & 3];
  return Buffer.concat([head, body]);
}

function readHead(sock, errors) {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) {
        if (buf.length > HEAD_MAX) { cleanup(); reject(new errors.ConnectionFailed("an answer head over 16 KiB")); }
        return;
      }
      cleanup();
      const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
      const status = Number(lines[0].split(" ")[1]);
      const headers = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(":");
        if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      resolve({ status, headers, rest: buf.subarray(end + 4) });
    };
    const onEnd = () => { cleanup(); reject(new errors.ConnectionFailed("hutch serve closed the connection")); };
    const cleanup = () => { sock.off("data", onData); sock.off("end", onEnd); sock.off("error", onEnd); };
    sock.on("data", onData);
    sock.on("end", onEnd);
    sock.on("error", onEnd);
  });
}

function readBody(sock, rest, len) {
  return new Promise((resolve) => {
    let buf = rest;
    if (buf.length >= len) return resolve(buf.subarray(0, len));
    const onData = (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= len) { sock.off("data", onData); resolve(buf.subarray(0, len)); }
    };
    sock.on("data", onData);
    sock.once("end", () => resolve(buf));
  });
}
