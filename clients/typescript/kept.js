// SPDX-License-Identifier: LGPL-2.1-or-later
// HTTP/1.1 over one kept socket, for the client's calls that answer a whole
// body (docs/clients.md "The kept connection"). Node's http module costs
// about 0.35 ms a request (bench/README.md), more than the 0.3 ms a call
// may add over the API; this writes each request in one write and reads
// the answer itself: Content-Length, chunked, or up to the close.

import net from "node:net";

const HEAD_MAX = 64 << 10;

/** The connection a call failed on, with whether any byte of its answer
 * had come (then the request must not be sent again). */
export class TransportError extends Error {
  constructor(message, { code = null, answered = false } = {}) {
    super(message);
    this.code = code;
    this.answered = answered;
  }
}

/** One HTTP/1.1 connection: one request at a time. */
export class KeptConnection {
  /** where: {socketPath} or {host, port}. */
  constructor(where) {
    this.sock = where.socketPath ? net.createConnection(where.socketPath)
                                 : net.createConnection({ host: where.host, port: where.port });
    this.sock.setNoDelay(true);
    // What came and is not yet an answer: the pieces as read (a large body
    // is joined once, when all of it is there), their length, and the
    // length the answer being read needs (0: not known yet).
    this.parts = [];
    this.len = 0;
    this.need = 0;
    this.busy = false;
    this.closed = false;
    this.used = false; // it answered a request already
    this.pending = null; // the call in flight: {check, fail}
    // The calls' timeout: one timer for the connection, re-armed
    // (refresh()) for each call and unref()'d between them, not a
    // setTimeout() and clearTimeout() a call (bench/bench-api.sh).
    this.timer = null;
    this.timerMs = 0;
    this.sock.on("data", (d) => {
      this.parts.push(d);
      this.len += d.length;
      if (this.pending) this.pending.check();
    });
    this.sock.on("error", (e) => {
      this.closed = true;
      if (this.pending) this.pending.fail(e);
    });
    this.sock.on("close", () => {
      this.closed = true;
      if (this.pending) this.pending.fail(null);
    });
  }

  /* What came, as one buffer. */
  #take() {
    if (this.parts.length > 1) this.parts = [Buffer.concat(this.parts, this.len)];
    return this.parts[0] ?? Buffer.alloc(0);
  }

  /* Drops the first @n bytes of what came. */
  #consume(buf, n) {
    const rest = buf.subarray(n);
    this.parts = rest.length ? [rest] : [];
    this.len = rest.length;
    this.need = 0;
  }

  destroy() {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.sock.destroy();
  }

  /* Arms the timeout for the call starting now (none: 0). */
  #arm(timeoutMs) {
    if (!timeoutMs) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      return;
    }
    if (this.timer && this.timerMs === timeoutMs) {
      this.timer.refresh();
      this.timer.ref();
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timerMs = timeoutMs;
    this.timer = setTimeout(() => this.pending?.expire(), timeoutMs);
  }

  /** Sends @head (a string ending in the blank line) and @body, resolves
   * to {status, headers, body}. Rejects with a TransportError. */
  request(head, body, timeoutMs) {
    this.busy = true;
    return new Promise((resolve, reject) => {
      const done = (err, answer) => {
        if (this.timer) this.timer.unref();
        this.pending = null;
        this.busy = false;
        if (err) {
          this.destroy();
          reject(err);
        } else {
          this.used = true;
          if (answer.close) this.destroy();
          resolve(answer);
        }
      };
      this.pending = {
        check: () => {
          if (this.need && this.len < this.need) return;
          const buf = this.#take();
          let a;
          try {
            a = parseAnswer(buf, false);
          } catch (e) {
            return done(new TransportError(e.message, { answered: true }));
          }
          if (!a) return;
          if (a.more) {
            this.need = a.more;
            return;
          }
          this.#consume(buf, a.used);
          done(null, a);
        },
        expire: () => done(new TransportError("timed out", { answered: this.len > 0 })),
        fail: (e) => {
          // An answer that ends with the connection is complete there.
          if (!e && this.len) {
            const buf = this.#take();
            let a = null;
            try {
              a = parseAnswer(buf, true);
            } catch {
              a = null;
            }
            if (a && !a.more) {
              this.#consume(buf, buf.length);
              return done(null, { ...a, close: true });
            }
          }
          const answered = this.len > 0;
          done(new TransportError(e ? e.message : "the connection closed",
                                  { code: e?.code ?? "ECONNRESET", answered }));
        },
      };
      // Bytes nobody asked for (the server gave up on the idle connection
      // with an answer of its own): the connection is not used.
      if (this.len) {
        this.#consume(this.#take(), this.len);
        this.destroy();
      }
      if (this.closed) return this.pending.fail(null);
      this.#arm(timeoutMs);
      this.sock.write(body && body.length ? Buffer.concat([Buffer.from(head), body]) : head);
    });
  }
}

/* The answer at the start of @buf, or null when more must come ({more: N}
 * when it is known that N bytes are needed); @atEnd: the connection closed
 * after @buf (a body without a length ends there). Throws on what is not
 * HTTP/1.1. */
function parseAnswer(buf, atEnd) {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) {
    if (buf.length > HEAD_MAX) throw new Error("an answer's head over 64 KiB");
    return null;
  }
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) throw new Error("not an HTTP/1.1 answer");
  const status = Number(m[1]);
  const headers = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const close = /(^|,)\s*close\s*(,|$)/i.test(headers["connection"] ?? "");
  let at = end + 4;
  if (status === 204 || status === 304 || (status >= 100 && status < 200)) {
    return { status, headers, body: Buffer.alloc(0), used: at, close };
  }
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
    const parts = [];
    for (;;) {
      const eol = buf.indexOf("\r\n", at);
      if (eol < 0) return null;
      const size = parseInt(buf.subarray(at, eol).toString("latin1").split(";")[0], 16);
      if (!Number.isFinite(size) || size < 0) throw new Error("a bad chunk size");
      at = eol + 2;
      if (size === 0) {
        // Trailers, if any, then the blank line.
        const tend = buf.indexOf("\r\n", at);
        if (tend < 0) return null;
        if (tend === at) return { status, headers, body: Buffer.concat(parts), used: at + 2, close };
        const all = buf.indexOf("\r\n\r\n", at);
        if (all < 0) return null;
        return { status, headers, body: Buffer.concat(parts), used: all + 4, close };
      }
      if (buf.length < at + size + 2) return null;
      parts.push(buf.subarray(at, at + size));
      at += size + 2;
    }
  }
  if (headers["content-length"] !== undefined) {
    const n = Number(headers["content-length"]);
    if (!Number.isInteger(n) || n < 0) throw new Error("a bad Content-Length");
    if (buf.length < at + n) return { more: at + n };
    return { status, headers, body: buf.subarray(at, at + n), used: at + n, close };
  }
  // No length: the body ends with the connection.
  if (!atEnd) return null;
  return { status, headers, body: buf.subarray(at), used: buf.length, close: true };
}
