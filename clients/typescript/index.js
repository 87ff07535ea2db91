// SPDX-License-Identifier: LGPL-2.1-or-later
// The client of `hutch serve` (docs/api.md), Node's standard library only.
// Types: index.d.ts. Over the unix socket by default, or TCP with a token;
// every API error becomes a typed ApiError, no server is ConnectionFailed.

import { spawn } from "node:child_process";
import http from "node:http";
import path from "node:path";
import readline from "node:readline";
import { KeptConnection } from "./kept.js";
import { openTerminal } from "./terminal.js";

export class HutchError extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}

/** No server answered: none running, a stale socket, a refused port. */
export class ConnectionFailed extends HutchError {}

/** An error answer of the API: status, code, message, field. */
export class ApiError extends HutchError {
  constructor(status, code, message, field = null) {
    super(`${code}: ${message}${field ? ` (at ${field})` : ""}`);
    this.status = status;
    this.code = code;
    this.apiMessage = message;
    this.field = field;
  }
}
export class InvalidArgument extends ApiError {}
export class Unauthorized extends ApiError {}
export class PermissionDenied extends ApiError {}
export class NotFound extends ApiError {}
export class Conflict extends ApiError {}
export class TooLarge extends ApiError {}
export class NotSupported extends ApiError {}
export class Unavailable extends ApiError {}
export class Timeout extends ApiError {}

const BY_CODE = {
  invalid_argument: InvalidArgument, invalid_json: InvalidArgument, invalid_path: InvalidArgument,
  unauthorized: Unauthorized, permission_denied: PermissionDenied, read_only: PermissionDenied,
  not_found: NotFound, no_such_route: NotFound, conflict: Conflict, busy: Conflict,
  not_empty: Conflict, is_a_directory: Conflict, not_a_directory: Conflict, too_large: TooLarge,
  not_supported: NotSupported, exec_failed: Unavailable, unavailable: Unavailable,
  out_of_memory: Unavailable, timeout: Timeout,
};

export function errorFromBody(status, body) {
  let code = "internal", message = `HTTP ${status}`, field = null;
  try {
    const e = JSON.parse(body.toString("utf8")).error;
    code = String(e.code);
    message = String(e.message);
    field = e.field ?? null;
  } catch {
    message = `HTTP ${status}: ${body.toString("utf8").slice(0, 200)}`;
  }
  return new (BY_CODE[code] ?? ApiError)(status, code, message, field);
}

/** Where `hutch serve` listens by default (as the store decides). */
export function defaultSocket() {
  const st = process.env.HUTCH_STATE_DIR ?? "";
  if (st.startsWith("/")) return path.join(st, "api.sock");
  if (process.geteuid?.() === 0) return "/run/hutch/api.sock";
  const xdg = process.env.XDG_RUNTIME_DIR ?? "";
  if (xdg.startsWith("/")) return path.join(xdg, "hutch", "api.sock");
  return `/tmp/hutch-${process.geteuid?.()}/api.sock`;
}

function decode(data, encoding) {
  if (data == null) return Buffer.alloc(0);
  return encoding === "base64" ? Buffer.from(data, "base64") : Buffer.from(data, "utf8");
}

function outcomeOf(o) {
  return {
    exitCode: o.exit_code, signal: o.signal ?? null, reason: o.reason, wallMs: o.wall_ms ?? 0,
    cpuMs: o.cpu_ms ?? 0, memPeakBytes: o.mem_peak_bytes ?? 0,
    stdoutTruncated: !!o.stdout_truncated, stderrTruncated: !!o.stderr_truncated,
    denied: o.denied ?? [], degraded: o.degraded ?? [], raw: o,
    get ok() { return this.reason === "exited" && this.exitCode === 0; },
  };
}

/* A mode as the API takes it ("0644"). */
function octal(mode) {
  return typeof mode === "number" ? mode.toString(8).padStart(4, "0") : mode;
}

/* A boolean query parameter, left out when false. */
function flag(v) {
  return v ? "true" : undefined;
}

function fileInfoOf(o) {
  return { name: o.name, type: o.type, size: o.size, mode: o.mode, mtimeMs: o.mtime_ms };
}

function sandboxInfoOf(o) {
  return { name: o.name, id: o.id, state: o.state, createdMs: o.created_ms,
           lastUsedMs: o.last_used_ms, diskBytes: o.disk_bytes, parent: o.parent ?? null,
           backend: o.backend ?? null, image: o.image ?? null, ports: o.ports ?? [] };
}

function execBody(argv, opts = {}) {
  if (!Array.isArray(argv)) throw new TypeError("argv is an array of strings");
  const b = { argv };
  if (opts.env != null) b.env = opts.env;
  if (opts.cwd != null) b.cwd = opts.cwd;
  if (opts.timeoutMs != null) b.timeout_ms = Math.trunc(opts.timeoutMs);
  if (typeof opts.stdin === "string") b.stdin = opts.stdin;
  else if (opts.stdin != null) b.stdin_base64 = Buffer.from(opts.stdin).toString("base64");
  if (opts.outputLimit != null) b.output_limit = opts.outputLimit;
  if (opts.user != null) b.user = String(opts.user);
  return b;
}

export class HutchClient {
  /** opts: {socket} (default defaultSocket()), or {url: "http://127.0.0.1:7777", token}. */
  constructor(opts = {}) {
    if (opts.socket && opts.url) throw new TypeError("give socket or url, not both");
    this.token = opts.token ?? null;
    this.timeoutMs = opts.timeoutMs ?? 600000;
    if (opts.url) {
      const u = new URL(opts.url);
      if (u.protocol !== "http:") throw new TypeError(`url must be http://HOST:PORT, not ${opts.url}`);
      this.url = opts.url;
      this.host = u.hostname.replace(/^\[|\]$/g, "");
      this.port = Number(u.port || 80);
      this.socket = null;
    } else {
      this.url = null;
      this.socket = opts.socket ?? defaultSocket();
    }
    this.server = null;
    // One kept connection (HTTP/1.1 keep-alive, kept.js) reused across
    // calls; a call made while it is busy, and each stream, get connections
    // of their own. How many the calls opened: this.connections.
    this.kept = null;
    this.connections = 0;
  }

  /** A client of the server on opts.socket; when none answers and
   * opts.autostart is not false, starts `hutch serve --socket PATH`
   * (opts.hutch, default $HUTCH_BIN or `hutch`) and owns it. */
  static async connect(opts = {}) {
    const c = new HutchClient(opts);
    try {
      await c.version();
      return c;
    } catch (e) {
      if (!(e instanceof ConnectionFailed) || opts.autostart === false) throw e;
    }
    await c.#startServer(opts.hutch ?? process.env.HUTCH_BIN ?? "hutch", opts.env);
    return c;
  }

  async #startServer(exe, env) {
    const p = spawn(exe, ["serve", "--socket", this.socket],
                    { stdio: ["ignore", "pipe", "pipe"], env: env ?? process.env });
    let err = "";
    p.stderr.on("data", (d) => { err += d; });
    const rl = readline.createInterface({ input: p.stdout });
    const ready = await new Promise((resolve) => {
      rl.once("line", (l) => resolve(l.startsWith("listening on ")));
      p.once("error", (e) => { err += String(e); resolve(false); });
      p.once("exit", () => resolve(false));
    });
    if (!ready) {
      p.kill("SIGKILL");
      throw new ConnectionFailed(`hutch serve did not start: ${err.trim()}`);
    }
    rl.on("line", () => {});
    this.server = p;
  }

  /** Stops the server this client started, if any. */
  async close() {
    if (this.kept) this.kept.destroy();
    this.kept = null;
    const p = this.server;
    this.server = null;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((resolve) => p.once("exit", resolve));
    p.kill("SIGTERM");
    await gone;
  }

  #where() { return this.url ?? `unix:${this.socket}`; }

  /** One request; resolves to the response (status checked), with a body
   * unless opts.stream. */
  #request(method, p, { query, body, raw, stream } = {}) {
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v != null) q.set(k, String(v));
      const s = q.toString().replace(/\+/g, "%20");
      if (s) p += "?" + s;
    }
    const headers = {};
    let data = null;
    if (body !== undefined && !Buffer.isBuffer(body) && typeof body !== "string") {
      data = Buffer.from(JSON.stringify(body));
      headers["Content-Type"] = "application/json";
    } else if (body !== undefined) {
      data = Buffer.from(body);
    }
    if (data) headers["Content-Length"] = String(data.length);
    else if (method !== "GET" && method !== "DELETE") headers["Content-Length"] = "0";
    if (this.token) headers["Authorization"] = `Bearer ${this.token}`;
    if (!stream) return this.#call(method, p, headers, data, raw);
    const opts = this.url
      ? { host: this.host, port: this.port, method, path: p, headers, agent: false }
      : { socketPath: this.socket, method, path: p, headers, agent: false };
    return this.#send(opts, data, raw, stream, false);
  }

  #open() {
    this.connections++;
    return new KeptConnection(this.url ? { host: this.host, port: this.port }
                                       : { socketPath: this.socket });
  }

  /* One call with a whole answer, on the kept connection. One the server
   * closed while idle fails before any byte of the answer: the request
   * goes once more on a new connection. One that failed in the middle of
   * an answer is destroyed, never reused, and its request is not sent
   * again. */
  async #call(method, p, headers, data, raw) {
    const host = !this.url ? "localhost"
      : this.host.includes(":") ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
    let head = `${method} ${p} HTTP/1.1\r\nHost: ${host}\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    head += "\r\n";
    for (let retry = true; ; retry = false) {
      let c = this.kept;
      let own = false;
      if (c && c.closed) c = this.kept = null;
      if (c && c.busy) {
        c = this.#open();
        own = true;
      } else if (!c) {
        c = this.kept = this.#open();
      }
      const reused = c.used;
      let a;
      try {
        a = await c.request(head, data, this.timeoutMs);
      } catch (e) {
        if (this.kept === c) this.kept = null;
        if (retry && reused && !e.answered && (e.code === "ECONNRESET" || e.code === "EPIPE")) {
          continue;
        }
        if (e.answered) {
          throw new ConnectionFailed(`hutch serve at ${this.#where()}: the answer was cut: ${e.message}`);
        }
        const what = e.code === "ENOENT" ? "the socket does not exist (start `hutch serve`)"
          : e.code === "ECONNREFUSED" ? "connection refused (a stale socket, or no server on that port)"
          : e.message;
        throw new ConnectionFailed(`no hutch serve at ${this.#where()}: ${what}`);
      } finally {
        if (own) c.destroy();
      }
      if (a.status >= 400) throw errorFromBody(a.status, a.body);
      return raw ? a.body : a.status === 204 || a.body.length === 0 ? null : JSON.parse(a.body);
    }
  }

  /* Sends one request on a connection of its own (a stream). */
  #send(opts, data, raw, stream, retry) {
    return new Promise((resolve, reject) => {
      let answered = false;
      const req = http.request(opts, (res) => {
        answered = true;
        if (res.statusCode >= 400 || !stream) {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          // Cut in the middle of the answer: the connection is gone (never
          // reused) and the request is not sent again.
          res.on("error", (e) => reject(new ConnectionFailed(
            `hutch serve at ${this.#where()}: the answer was cut: ${e.message}`)));
          res.on("end", () => {
            const buf = Buffer.concat(chunks);
            if (res.statusCode >= 400) return reject(errorFromBody(res.statusCode, buf));
            resolve(raw ? buf : res.statusCode === 204 || buf.length === 0 ? null
                                                                          : JSON.parse(buf));
          });
          return;
        }
        resolve({ res, req });
      });
      req.setTimeout(this.timeoutMs, () => req.destroy(new Error("timed out")));
      req.on("error", (e) => {
        if (e instanceof HutchError) return reject(e);
        if (retry && !answered && req.reusedSocket &&
            (e.code === "ECONNRESET" || e.code === "EPIPE")) {
          return resolve(this.#send(opts, data, raw, stream, false));
        }
        const what = e.code === "ENOENT" ? "the socket does not exist (start `hutch serve`)"
          : e.code === "ECONNREFUSED" ? "connection refused (a stale socket, or no server on that port)"
          : e.message;
        reject(new ConnectionFailed(`no hutch serve at ${this.#where()}: ${what}`));
      });
      if (data) req.write(data);
      req.end();
    });
  }

  static #sb(name, tail = "") { return `/v1/sandboxes/${encodeURIComponent(name)}${tail}`; }

  version() { return this.#request("GET", "/v1/version"); }
  async routes() { return (await this.#request("GET", "/v1/routes")).routes; }

  async list() {
    return (await this.#request("GET", "/v1/sandboxes")).sandboxes.map(sandboxInfoOf);
  }
  async create(name, { policy, fromSnapshot } = {}) {
    const body = { name };
    if (policy != null) body.policy = policy;
    if (fromSnapshot != null) body.from_snapshot = fromSnapshot;
    await this.#request("POST", "/v1/sandboxes", { body });
    return new Sandbox(this, name);
  }
  sandbox(name) { return new Sandbox(this, name); }

  /** A command with its stdin open through the exec WebSocket (docs/api.md):
   * opts {tty, cols, rows, env, cwd, timeoutMs, user}. Resolves to a Terminal
   * (terminal.js) once the server took the upgrade. */
  terminal(name, argv, opts = {}) {
    const req = execBody(argv, { env: opts.env, cwd: opts.cwd, timeoutMs: opts.timeoutMs,
                                 user: opts.user });
    if (opts.tty) req.tty = true;
    if (opts.cols != null) req.cols = opts.cols;
    if (opts.rows != null) req.rows = opts.rows;
    const where = this.url ? { host: this.host, port: this.port, token: this.token }
                           : { socket: this.socket, token: this.token };
    return openTerminal(where, HutchClient.#sb(name, "/exec/ws"), req,
                        { ConnectionFailed, ApiError, errorFromBody });
  }

  /** The published ports, [{port, protocol, hostIp, hostPort}] (hostPort 0
   * while stopped: a free one is chosen when it starts). */
  async ports(name) {
    const a = await this.#request("GET", HutchClient.#sb(name, "/ports"));
    return a.ports.map((p) => ({ port: p.port, protocol: p.protocol, hostIp: p.host_ip,
                                 hostPort: p.host_port }));
  }

  /** Publishes sandbox port @port on the host (opts.hostIp, default
   * 127.0.0.1; opts.hostPort, default a free one), running or stopped, as
   * `hutch port NAME add`: resolves to the entry as ports() lists it. */
  async publishPort(name, port, { hostPort, hostIp } = {}) {
    const body = { port: Number(port) };
    if (hostPort != null) body.host_port = Number(hostPort);
    if (hostIp != null) body.host_ip = String(hostIp);
    const p = await this.#request("POST", HutchClient.#sb(name, "/ports"), { body });
    return { port: p.port, protocol: p.protocol, hostIp: p.host_ip, hostPort: p.host_port };
  }
  /** Stops publishing sandbox port @port (`hutch port NAME rm`). */
  async unpublishPort(name, port) {
    await this.#request("DELETE", HutchClient.#sb(name, `/ports/${Number(port)}`));
  }

  /** The preview URL of sandbox port @port through this TCP server
   * (.../ports/PORT/, authenticated as the API is); null over the unix
   * socket, which has no URL. */
  previewUrl(name, port) {
    if (!this.url) return null;
    return `${this.url.replace(/\/+$/, "")}${HutchClient.#sb(name, `/ports/${Number(port)}/`)}`;
  }
  async get(name) { return sandboxInfoOf(await this.#request("GET", HutchClient.#sb(name))); }
  async delete(name) { await this.#request("DELETE", HutchClient.#sb(name)); }
  async stop(name) { await this.#request("POST", HutchClient.#sb(name, "/stop")); }

  async exec(name, argv, opts = {}) {
    const a = await this.#request("POST", HutchClient.#sb(name, "/exec"),
                                  { body: execBody(argv, opts) });
    const stdout = decode(a.stdout, a.stdout_encoding), stderr = decode(a.stderr, a.stderr_encoding);
    const outcome = outcomeOf(a.outcome);
    return { outcome, stdout, stderr, exitCode: outcome.exitCode, ok: outcome.ok,
             get stdoutText() { return stdout.toString("utf8"); },
             get stderrText() { return stderr.toString("utf8"); } };
  }
  /** opts.stdinOpen: its stdin stays open for writeStdin(). */
  async execDetached(name, argv, opts = {}) {
    const body = { ...execBody(argv, opts), detach: true };
    if (opts.stdinOpen) body.stdin_open = true;
    return (await this.#request("POST", HutchClient.#sb(name, "/exec"), { body })).id;
  }
  /** Yields {stream, data: Buffer} as the output comes, then {outcome}.
   * Breaking out of the loop kills the command. */
  async *execStream(name, argv, opts = {}) {
    const { res, req } = await this.#request("POST", HutchClient.#sb(name, "/exec/stream"),
                                             { body: execBody(argv, opts), stream: true });
    const rl = readline.createInterface({ input: res, crlfDelay: Infinity });
    try {
      for await (const line of rl) {
        if (!line) continue;
        const ev = JSON.parse(line);
        if (ev.stream) yield { stream: ev.stream, data: decode(ev.data, ev.encoding) };
        else if (ev.outcome) { yield { outcome: outcomeOf(ev.outcome) }; return; }
        else if (ev.error) throw errorFromBody(500, Buffer.from(line));
      }
      throw new ConnectionFailed("the exec stream ended without an outcome");
    } finally {
      rl.close();
      req.destroy();
    }
  }

  readFile(name, p) {
    return this.#request("GET", HutchClient.#sb(name, "/files"), { query: { path: p }, raw: true });
  }
  async writeFile(name, p, data, { mode, parents } = {}) {
    await this.#request("PUT", HutchClient.#sb(name, "/files"),
                        { query: { path: p, mode: octal(mode), parents: flag(parents) },
                          body: Buffer.from(data) });
  }
  async mkdir(name, p, { mode, parents } = {}) {
    await this.#request("POST", HutchClient.#sb(name, "/files/mkdir"),
                        { query: { path: p, mode: octal(mode), parents: flag(parents) } });
  }
  async move(name, from, to, { replace = false, parents = false } = {}) {
    await this.#request("POST", HutchClient.#sb(name, "/files/move"),
                        { body: { from, to, replace, parents } });
  }
  /* The tree below folder p as a tar stream (symlinks kept, modes and
   * mtimes; at most 64 MiB). */
  downloadTree(name, p = ".") {
    return this.#request("GET", HutchClient.#sb(name, "/files/archive"),
                         { query: { path: p }, raw: true });
  }
  /* Extracts the tar stream into folder p inside the sandbox; a '..' path,
   * a link pointing out or a device node is a HutchError naming the entry. */
  async uploadTree(name, p, tar, { parents } = {}) {
    await this.#request("PUT", HutchClient.#sb(name, "/files/archive"),
                        { query: { path: p, parents: flag(parents) }, body: Buffer.from(tar) });
  }
  async removeFile(name, p) {
    await this.#request("DELETE", HutchClient.#sb(name, "/files"), { query: { path: p } });
  }
  async listFiles(name, p = ".", { recursive, depth } = {}) {
    const query = { path: p, recursive: flag(recursive),
                    depth: depth === undefined ? undefined : String(depth) };
    const a = await this.#request("GET", HutchClient.#sb(name, "/files/list"), { query });
    return a.entries.map(fileInfoOf);
  }
  async stat(name, p) {
    return fileInfoOf(await this.#request("GET", HutchClient.#sb(name, "/files/stat"),
                                          { query: { path: p } }));
  }
  async exists(name, p) {
    try {
      await this.stat(name, p);
      return true;
    } catch (e) {
      if (e instanceof NotFound && e.code === "not_found") return false;
      throw e;
    }
  }

  async snapshot(name, snapshot) {
    await this.#request("POST", HutchClient.#sb(name, "/snapshots"), { body: { snapshot } });
  }
  async restore(name, snapshot) {
    await this.#request("POST", HutchClient.#sb(name, "/restore"), { body: { snapshot } });
  }
  async snapshots() {
    return (await this.#request("GET", "/v1/snapshots")).snapshots.map((s) => s.name);
  }
  async removeSnapshot(snapshot) {
    await this.#request("DELETE", `/v1/snapshots/${encodeURIComponent(snapshot)}`);
  }
  async diff(name) { return (await this.#request("GET", HutchClient.#sb(name, "/diff"))).changes; }
  async apply(name, { paths, force } = {}) {
    const body = {};
    if (paths != null) body.paths = paths;
    if (force) body.force = true;
    return (await this.#request("POST", HutchClient.#sb(name, "/apply"), { body })).applied;
  }
  async audit(name, { limit } = {}) {
    return (await this.#request("GET", HutchClient.#sb(name, "/audit"), { query: { limit } })).entries;
  }

  // The execs as processes (docs/processes.md).
  async processes(name) {
    return (await this.#request("GET", HutchClient.#sb(name, "/execs"))).execs;
  }
  process(name, id) {
    return this.#request("GET", HutchClient.#sb(name, `/execs/${Number(id)}`));
  }
  /** Writes data to the stdin of exec @id (started with execDetached(...,
   * {stdinOpen: true})); opts.close: then its EOF. */
  async writeStdin(name, id, data = "", { close = false } = {}) {
    await this.#request("POST", HutchClient.#sb(name, `/execs/${Number(id)}/stdin`),
                        { query: { close: close ? 1 : undefined }, body: Buffer.from(data) });
  }
  /** Resolves to the exec's outcome once it ended. */
  async wait(name, id) {
    const a = await this.#request("GET", HutchClient.#sb(name, `/execs/${Number(id)}`),
                                  { query: { wait: 1 } });
    return outcomeOf(a.outcome);
  }
  /** As `hutch kill`: without signal, TERM then KILL after graceMs (default
   * 10000); with it, that signal only unless graceMs is given. */
  async kill(name, id, { signal, graceMs } = {}) {
    const body = {};
    if (signal != null) body.signal = String(signal);
    if (graceMs != null) body.grace_ms = graceMs;
    await this.#request("POST", HutchClient.#sb(name, `/execs/${Number(id)}/signal`), { body });
  }
  /** Yields {stream, data: Buffer} of a detached exec's output; with
   * follow, as it is written, then {outcome} when it ended. */
  async *output(name, id, { follow = false } = {}) {
    const { res, req } = await this.#request("GET", HutchClient.#sb(name, `/execs/${Number(id)}/output`),
                                             { query: { follow: follow ? 1 : null }, stream: true });
    const rl = readline.createInterface({ input: res, crlfDelay: Infinity });
    try {
      for await (const line of rl) {
        if (!line) continue;
        const ev = JSON.parse(line);
        if (ev.stream) yield { stream: ev.stream, data: decode(ev.data, ev.encoding) };
        else if (ev.outcome) { yield { outcome: outcomeOf(ev.outcome) }; return; }
      }
    } finally {
      rl.close();
      req.destroy();
    }
  }
}

/** One sandbox of a client: its calls without the name. */
export class Sandbox {
  constructor(client, name) {
    this.client = client;
    this.name = name;
  }
  info() { return this.client.get(this.name); }
  exec(argv, opts) { return this.client.exec(this.name, argv, opts); }
  execDetached(argv, opts) { return this.client.execDetached(this.name, argv, opts); }
  execStream(argv, opts) { return this.client.execStream(this.name, argv, opts); }
  readFile(p) { return this.client.readFile(this.name, p); }
  writeFile(p, data, opts) { return this.client.writeFile(this.name, p, data, opts); }
  mkdir(p, opts) { return this.client.mkdir(this.name, p, opts); }
  move(from, to, opts) { return this.client.move(this.name, from, to, opts); }
  downloadTree(p) { return this.client.downloadTree(this.name, p); }
  terminal(argv, opts) { return this.client.terminal(this.name, argv, opts); }
  ports() { return this.client.ports(this.name); }
  previewUrl(port) { return this.client.previewUrl(this.name, port); }
  publishPort(port, opts) { return this.client.publishPort(this.name, port, opts); }
  unpublishPort(port) { return this.client.unpublishPort(this.name, port); }
  uploadTree(p, tar, opts) { return this.client.uploadTree(this.name, p, tar, opts); }
  removeFile(p) { return this.client.removeFile(this.name, p); }
  listFiles(p, opts) { return this.client.listFiles(this.name, p, opts); }
  stat(p) { return this.client.stat(this.name, p); }
  exists(p) { return this.client.exists(this.name, p); }
  snapshot(s) { return this.client.snapshot(this.name, s); }
  restore(s) { return this.client.restore(this.name, s); }
  diff() { return this.client.diff(this.name); }
  apply(opts) { return this.client.apply(this.name, opts); }
  audit(opts) { return this.client.audit(this.name, opts); }
  processes() { return this.client.processes(this.name); }
  process(id) { return this.client.process(this.name, id); }
  wait(id) { return this.client.wait(this.name, id); }
  writeStdin(id, data, opts) { return this.client.writeStdin(this.name, id, data, opts); }
  kill(id, opts) { return this.client.kill(this.name, id, opts); }
  output(id, opts) { return this.client.output(this.name, id, opts); }
  stop() { return this.client.stop(this.name); }
  delete() { return this.client.delete(this.name); }
}
