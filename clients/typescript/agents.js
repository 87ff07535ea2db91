// SPDX-License-Identifier: LGPL-2.1-or-later
// HutchSandboxClient: hutch as a sandbox of the OpenAI Agents SDK
// (`@openai/agents` 0.20.x, its SandboxClient/SandboxSession contract in
// dist/sandbox/client.d.ts and session.d.ts). Imported as
// "hutch-client/agents"; the SDK is a peer dependency of this module only.
// Each session is one persistent hutch sandbox whose workspace (the
// manifest's root, /workspace) is an overlay of an empty host folder: the
// agent's commands and files stay in the sandbox (docs/clients.md).

import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { applyDiff } from "@openai/agents";
import { Manifest, normalizeSandboxClientCreateArgs } from "@openai/agents/sandbox";
import { HutchClient, NotFound, NotSupported } from "./index.js";

const ROOT = "/workspace";
const OUTPUT_LIMIT = 16 << 20;
/* The SDK's unix-local client's defaults. */
const DEFAULT_EXEC_YIELD_MS = 10000;
const DEFAULT_WRITE_STDIN_YIELD_MS = 250;

function unsupported(what) {
  return new NotSupported(501, "not_supported", `HutchSandboxClient: ${what}`, null);
}

function formatExecResponse(r) {
  const lines = [`Chunk ID: ${randomBytes(3).toString("hex")}`,
                 `Wall time: ${r.wallTimeSeconds.toFixed(4)} seconds`];
  if (typeof r.exitCode === "number") lines.push(`Process exited with code ${r.exitCode}`);
  lines.push("Output:", r.output);
  return lines.join("\n");
}

function quote(s) { return `'${String(s).replace(/'/g, `'\\''`)}'`; }

export class HutchSandboxSession {
  constructor(client, state) {
    this.client = client;
    this.state = state;
  }

  get #sb() { return this.client.sandbox(this.state.sandboxName); }

  /** An absolute path inside the sandbox: relative ones from the root. */
  #path(p = ".") {
    const abs = path.posix.resolve(ROOT, String(p));
    return abs;
  }

  /* tty sessions run behind hutch's exec WebSocket (a pty made inside
   * the sandbox); writeStdin sends keys to them. */
  supportsPty() { return this.state.backend !== "vm"; }  /* the VM's agent has no pty yet */

  #sessions = new Map();
  #nextSession = 1;

  async exec(args) {
    const start = Date.now();
    const shell = args.shell ?? "/bin/sh";
    const argv = [shell, ...(args.login ? ["-l"] : []), "-c", args.cmd];
    const opts = { cwd: this.#path(args.workdir ?? "."), env: this.state.environment ?? {} };
    if (args.tty) return this.#execTty(argv, opts, args, start);
    const r = await this.#sb.exec(argv, { ...opts, outputLimit: OUTPUT_LIMIT });
    const stdout = r.stdoutText, stderr = r.stderrText;
    return { output: stdout + stderr, stdout, stderr, exitCode: r.exitCode,
             wallTimeSeconds: (Date.now() - start) / 1000 };
  }

  /* As the SDK's unix-local client: wait up to yieldTimeMs; a command that
   * is still running is a session (its id returned) for writeStdin. */
  async #execTty(argv, opts, args, start) {
    const t = await this.#sb.terminal(argv, { ...opts, tty: true, cols: 120, rows: 40 });
    await t.started;
    await t.waitDone(args.yieldTimeMs ?? DEFAULT_EXEC_YIELD_MS);
    return this.#ttyResult(t, null, start);
  }

  #ttyResult(t, sessionId, start) {
    const output = t.takeOutput().toString("utf8");
    const r = { output, stdout: output, stderr: "", wallTimeSeconds: (Date.now() - start) / 1000 };
    if (t.finished) {
      if (sessionId !== null) this.#sessions.delete(sessionId);
      t.close();
      r.exitCode = t.exitCode ?? 1;
      return r;
    }
    if (sessionId === null) {
      sessionId = this.#nextSession++;
      this.#sessions.set(sessionId, t);
    }
    r.sessionId = sessionId;
    return r;
  }

  async writeStdin(args) {
    const start = Date.now();
    const t = this.#sessions.get(args.sessionId);
    if (!t) {
      return formatExecResponse({ output: `write_stdin failed: session not found: ${args.sessionId}`,
                                  wallTimeSeconds: 0, exitCode: 1 });
    }
    if (args.chars) t.write(args.chars);
    const wait = args.yieldTimeMs ?? DEFAULT_WRITE_STDIN_YIELD_MS;
    await t.waitDone(wait);
    return formatExecResponse(this.#ttyResult(t, args.sessionId, start));
  }

  async execCommand(args) { return formatExecResponse(await this.exec(args)); }


  async readFile(args) {
    const data = await this.#sb.readFile(this.#path(args.path));
    if (args.maxBytes != null && data.length > args.maxBytes)
      return new Uint8Array(data.subarray(0, args.maxBytes));
    return new Uint8Array(data);
  }

  async listDir(args) {
    const dir = this.#path(args.path);
    return (await this.#sb.listFiles(dir)).map((e) => ({
      name: e.name, path: path.posix.join(dir, e.name),
      type: e.type === "file" || e.type === "dir" ? e.type : "other",
    }));
  }

  async pathExists(p) { return this.#sb.exists(this.#path(p)); }

  async directoryExists(p) {
    try {
      return (await this.#sb.stat(this.#path(p))).type === "dir";
    } catch (e) {
      if (e instanceof NotFound) return false;
      throw e;
    }
  }

  async #mkdirs(dir) {
    const r = await this.#sb.exec(["mkdir", "-p", "--", dir]);
    if (!r.ok) throw new Error(`mkdir ${dir}: ${r.stderrText.trim()}`);
  }

  async #write(p, content) {
    const abs = this.#path(p);
    await this.#mkdirs(path.posix.dirname(abs));
    await this.#sb.writeFile(abs, typeof content === "string" ? content : Buffer.from(content));
  }

  async materializeEntry({ path: p, entry }) {
    if (entry.type === "file") return this.#write(p, entry.content);
    if (entry.type === "dir") {
      await this.#mkdirs(this.#path(p));
      for (const [name, child] of Object.entries(entry.children ?? {}))
        await this.materializeEntry({ path: path.posix.join(p, name), entry: child });
      return;
    }
    throw unsupported(`manifest entries of type '${entry.type}'`);
  }

  async applyManifest(manifest) {
    for (const [p, entry] of Object.entries(manifest.entries ?? {}))
      await this.materializeEntry({ path: p, entry });
  }

  /** The SDK's apply_patch edits, as file writes in the sandbox. */
  createEditor() {
    const s = this;
    return {
      async createFile(op) {
        await s.#write(op.path, applyDiff("", op.diff, "create"));
        return { status: "completed", output: `Created ${op.path}` };
      },
      async updateFile(op) {
        const old = Buffer.from(await s.#sb.readFile(s.#path(op.path))).toString("utf8");
        const next = applyDiff(old, op.diff);
        if (op.move_to || op.moveTo) {
          await s.#write(op.move_to ?? op.moveTo, next);
          await s.#sb.removeFile(s.#path(op.path));
        } else {
          await s.#write(op.path, next);
        }
        return { status: "completed", output: `Updated ${op.path}` };
      },
      async deleteFile(op) {
        await s.#sb.removeFile(s.#path(op.path));
        return { status: "completed", output: `Deleted ${op.path}` };
      },
    };
  }

  /** The workspace as a tar archive (made by tar inside the sandbox). */
  /* The workspace as tar, written and read by hutch inside the sandbox
   * (GET/PUT .../files/archive): no tar program needed in the image. */
  async persistWorkspace() {
    return new Uint8Array(await this.#sb.downloadTree(ROOT));
  }

  async hydrateWorkspace(data) {
    const bytes = typeof data === "string" ? Buffer.from(data, "base64") : Buffer.from(data);
    await this.#sb.uploadTree(ROOT, bytes, { parents: true });
  }

  /* A published port (the sandbox's policy, `ports`): its host address
   * as bound; else, over TCP, serve's preview route for the port. */
  async resolveExposedPort(port) {
    const p = Number(port);
    if (!Number.isInteger(p) || p < 1 || p > 65535) throw new RangeError(`invalid port ${port}`);
    const found = (await this.#sb.ports()).find((x) => x.port === p && x.hostPort > 0);
    let endpoint;
    if (found) {
      endpoint = { host: found.hostIp, port: found.hostPort, tls: false };
    } else if (this.client.url) {
      const url = this.#sb.previewUrl(p);
      const u = new URL(url);
      endpoint = { host: u.hostname, port: Number(u.port), tls: false, url };
    } else {
      throw unsupported(`port ${p} is not published (create the session with ports: [${p}]), ` +
                        "and the preview route needs a client over TCP");
    }
    this.state.exposedPorts = { ...(this.state.exposedPorts ?? {}), [String(p)]: endpoint };
    return endpoint;
  }

  async running() { return (await this.#sb.info()).state === "running"; }
  #closeSessions() {
    for (const t of this.#sessions.values()) t.close();
    this.#sessions.clear();
  }

  async stop() {
    this.#closeSessions();
    try {
      await this.#sb.stop();
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
  }
  async shutdown() {}
  async delete() {
    this.#closeSessions();
    try {
      await this.#sb.delete();
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
    if (this.state.hostDir) fs.rmSync(this.state.hostDir, { recursive: true, force: true });
  }
  async close() {}
}

export class HutchSandboxClient {
  /** opts: {client?: HutchClient (else HutchClient.connect({socket, hutch})),
   * socket?, hutch?, policy?: extra hutch policy (limits, allow_hosts,
   * secrets...; docs/policy.md)}. */
  constructor(opts = {}) {
    this.backendId = "hutch";
    this.supportsDefaultOptions = true;
    this.opts = opts;
    this.client = opts.client ?? null;
  }

  async #api() {
    if (!this.client)
      this.client = await HutchClient.connect({ socket: this.opts.socket, hutch: this.opts.hutch });
    return this.client;
  }

  async create(args, manifestOptions) {
    const a = normalizeSandboxClientCreateArgs(args, manifestOptions);
    const manifest = a.manifest;
    if (manifest.root !== ROOT) throw unsupported(`a manifest root other than ${ROOT}`);
    /* The runtime's default spec is "local" (a workspace tar on the
     * host after the run); hutch keeps the workspace in the sandbox until
     * delete, so "local" and "noop" ask nothing more. Others are refused. */
    if (a.snapshot?.type && !["noop", "local"].includes(a.snapshot.type))
      throw unsupported(`snapshot specs of type '${a.snapshot.type}'`);
    const options = { ...(this.opts.options ?? {}), ...(a.options ?? {}) };
    const api = await this.#api();
    const hostDir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-agents-"));
    const name = "agents-" + randomBytes(6).toString("hex");
    const policy = { ...(this.opts.policy ?? {}), ...(options.policy ?? {}),
                     workspace: { path: hostDir, mode: "overlay" } };
    if (options.allowHosts) policy.allow_hosts = options.allowHosts;
    /* Published ports: a number is 127.0.0.1:<free>:PORT; a string is
     * hutch's -p spec (docs/policy.md). resolveExposedPort() finds them. */
    const ports = options.exposedPorts ?? options.ports;
    if (ports) policy.ports = ports.map((p) => (typeof p === "number" ? `0:${p}` : String(p)));
    const environment = {};
    for (const [k, v] of Object.entries(manifest.environment ?? {}))
      environment[k] = typeof v?.resolve === "function" ? await v.resolve() : String(v?.value ?? v);
    try {
      await api.create(name, { policy });
    } catch (e) {
      fs.rmSync(hostDir, { recursive: true, force: true });
      throw e;
    }
    const session = new HutchSandboxSession(api, {
      manifest, sandboxName: name, hostDir, environment, workspaceReady: false,
      backend: (await api.get(name)).backend ?? "ns",
    });
    try {
      await session.applyManifest(manifest);
    } catch (e) {
      await session.delete();
      throw e;
    }
    session.state.workspaceReady = true;
    return session;
  }

  async resume(state) {
    const api = await this.#api();
    const info = await api.get(state.sandboxName); /* NotFound when it is gone */
    state.backend = info.backend ?? "ns";
    return new HutchSandboxSession(api, state);
  }

  async delete(state) {
    await new HutchSandboxSession(await this.#api(), state).delete();
  }

  async serializeSessionState(state) {
    return { sandboxName: state.sandboxName, hostDir: state.hostDir,
             environment: state.environment ?? {}, workspaceReady: !!state.workspaceReady };
  }

  async deserializeSessionState(obj) {
    if (typeof obj?.sandboxName !== "string") throw new TypeError("not a hutch session state");
    return { manifest: obj.manifest instanceof Manifest ? obj.manifest : new Manifest(obj.manifest ?? {}),
             sandboxName: obj.sandboxName, hostDir: obj.hostDir, environment: obj.environment ?? {},
             workspaceReady: !!obj.workspaceReady };
  }
}
