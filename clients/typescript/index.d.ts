// SPDX-License-Identifier: LGPL-2.1-or-later
// Types of hutch-client (index.js): the client of `hutch serve`, docs/api.md.

export class HutchError extends Error {}
/** No server answered: none running, a stale socket, a refused port. */
export class ConnectionFailed extends HutchError {}
/** An error answer of the API: {"error": {code, message, field}}. */
export class ApiError extends HutchError {
  readonly status: number;
  readonly code: string;
  readonly apiMessage: string;
  /** A JSON pointer into the request ("/env/KEY"), or null. */
  readonly field: string | null;
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
export function errorFromBody(status: number, body: Buffer): ApiError;
export function defaultSocket(): string;

export interface Outcome {
  exitCode: number;
  /** The terminating signal, null when none. */
  signal: number | null;
  reason: "exited" | "signaled" | "timeout" | "oom" | "pids" | "killed" | string;
  wallMs: number;
  cpuMs: number;
  memPeakBytes: number;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  denied: unknown[];
  degraded: unknown[];
  /** Every field the server sent. */
  raw: Record<string, unknown>;
  readonly ok: boolean;
}
export interface ExecResult {
  outcome: Outcome;
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number;
  ok: boolean;
  readonly stdoutText: string;
  readonly stderrText: string;
}
export interface ExecOptions {
  env?: Record<string, string>;
  cwd?: string;
  timeoutMs?: number;
  stdin?: string | Uint8Array;
  outputLimit?: number;
  /** NAME, UID, NAME:GROUP or UID:GID of the sandbox's /etc/passwd (default: the sandbox's user). */
  user?: string;
}
export type StreamEvent = { stream: "stdout" | "stderr"; data: Buffer } | { outcome: Outcome };
export interface FileInfo {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  /** Octal permission bits, "0644". */
  mode: string;
  mtimeMs: number;
}
export interface SandboxInfo {
  name: string;
  id: string;
  state: "running" | "stopped";
  createdMs: number;
  lastUsedMs: number;
  diskBytes: number;
  parent: string | null;
  /** Since API 1.4. */
  backend: "ns" | "vm" | null;
  image: string | null;
  ports: { port: number; protocol?: string; host_ip?: string; host_port?: number }[];
}
export interface PortInfo { port: number; protocol: string; hostIp: string; hostPort: number }
export interface TerminalOptions {
  tty?: boolean; cols?: number; rows?: number;
  env?: Record<string, string>; cwd?: string; timeoutMs?: number;
  user?: string;
}
/** A command behind the exec WebSocket (terminal.js). */
export interface Terminal {
  id: number | null;
  exitCode: number | null;
  outcome: unknown;
  finished: boolean;
  started: Promise<number>;
  done: Promise<{ exitCode: number; outcome: unknown }>;
  write(data: string | Uint8Array): void;
  resize(cols: number, rows: number): void;
  signal(signal: string | number): void;
  closeStdin(): void;
  takeOutput(): Buffer;
  waitOutput(ms: number): Promise<void>;
  waitDone(ms: number): Promise<boolean>;
  close(): void;
}
export interface Change { path: string; kind: string; type: string }

export interface ClientOptions {
  /** The unix socket (default defaultSocket()). */
  socket?: string;
  /** TCP: "http://127.0.0.1:7777", with token. */
  url?: string;
  token?: string;
  timeoutMs?: number;
}
export interface ConnectOptions extends ClientOptions {
  /** Start `hutch serve` when none answers (default true). */
  autostart?: boolean;
  /** The hutch binary (default $HUTCH_BIN or `hutch`). */
  hutch?: string;
  env?: NodeJS.ProcessEnv;
}

export class HutchClient {
  constructor(opts?: ClientOptions);
  /** How many connections the calls opened (one while the kept one lasts). */
  readonly connections: number;
  static connect(opts?: ConnectOptions): Promise<HutchClient>;
  /** Stops the server this client started, if any. */
  close(): Promise<void>;
  version(): Promise<{ version: string; api_major: number; api_minor: number }>;
  routes(): Promise<{ method: string; path: string; query: string[] | null }[]>;
  list(): Promise<SandboxInfo[]>;
  create(name: string, opts?: { policy?: Record<string, unknown>; fromSnapshot?: string }): Promise<Sandbox>;
  sandbox(name: string): Sandbox;
  get(name: string): Promise<SandboxInfo>;
  delete(name: string): Promise<void>;
  stop(name: string): Promise<void>;
  exec(name: string, argv: string[], opts?: ExecOptions): Promise<ExecResult>;
  execDetached(name: string, argv: string[],
               opts?: ExecOptions & { stdinOpen?: boolean }): Promise<number>;
  /** Writes to a detached exec's stdin (started with stdinOpen); close: then EOF. */
  writeStdin(name: string, id: number, data?: string | Uint8Array,
             opts?: { close?: boolean }): Promise<void>;
  execStream(name: string, argv: string[], opts?: ExecOptions): AsyncGenerator<StreamEvent>;
  readFile(name: string, path: string): Promise<Buffer>;
  writeFile(name: string, path: string, data: string | Uint8Array, opts?: { mode?: number | string; parents?: boolean }): Promise<void>;
  mkdir(name: string, path: string, opts?: { mode?: number | string; parents?: boolean }): Promise<void>;
  move(name: string, from: string, to: string, opts?: { replace?: boolean; parents?: boolean }): Promise<void>;
  /** The tree below a folder as a tar stream (symlinks kept as symlinks, modes, mtimes). */
  terminal(name: string, argv: string[], opts?: TerminalOptions): Promise<Terminal>;
  ports(name: string): Promise<PortInfo[]>;
  previewUrl(name: string, port: number): string | null;
  /** Publishes a port of a running or stopped sandbox (`hutch port NAME add`). */
  publishPort(name: string, port: number,
              opts?: { hostPort?: number; hostIp?: string }): Promise<PortInfo>;
  /** Stops publishing a port (`hutch port NAME rm`). */
  unpublishPort(name: string, port: number): Promise<void>;
  downloadTree(name: string, path?: string): Promise<Buffer>;
  /** Extracts a tar stream into a folder inside the sandbox (parents: make it). */
  uploadTree(name: string, path: string, tar: Uint8Array, opts?: { parents?: boolean }): Promise<void>;
  removeFile(name: string, path: string): Promise<void>;
  listFiles(name: string, path?: string, opts?: { recursive?: boolean; depth?: number }): Promise<FileInfo[]>;
  stat(name: string, path: string): Promise<FileInfo>;
  exists(name: string, path: string): Promise<boolean>;
  snapshot(name: string, snapshot: string): Promise<void>;
  restore(name: string, snapshot: string): Promise<void>;
  snapshots(): Promise<string[]>;
  removeSnapshot(snapshot: string): Promise<void>;
  diff(name: string): Promise<Change[]>;
  apply(name: string, opts?: { paths?: string[]; force?: boolean }): Promise<unknown>;
  audit(name: string, opts?: { limit?: number }): Promise<Record<string, unknown>[]>;
  /** The running execs (docs/processes.md). */
  processes(name: string): Promise<ProcessInfo[]>;
  /** A running exec, or {id, running: false, outcome} of one that ended. */
  process(name: string, id: number): Promise<ProcessInfo | { id: number; running: false; outcome: Record<string, unknown> }>;
  wait(name: string, id: number): Promise<Outcome>;
  kill(name: string, id: number, opts?: { signal?: string; graceMs?: number }): Promise<void>;
  output(name: string, id: number, opts?: { follow?: boolean }): AsyncGenerator<StreamEvent>;
}

export interface ProcessInfo {
  id: number;
  argv: string[];
  start_ms: number;
  /** Its first process as the sandbox sees it (0: not known yet). */
  pid: number;
  detached: boolean;
  running: true;
}

export class Sandbox {
  readonly client: HutchClient;
  readonly name: string;
  constructor(client: HutchClient, name: string);
  info(): Promise<SandboxInfo>;
  exec(argv: string[], opts?: ExecOptions): Promise<ExecResult>;
  execDetached(argv: string[], opts?: ExecOptions & { stdinOpen?: boolean }): Promise<number>;
  writeStdin(id: number, data?: string | Uint8Array, opts?: { close?: boolean }): Promise<void>;
  execStream(argv: string[], opts?: ExecOptions): AsyncGenerator<StreamEvent>;
  readFile(path: string): Promise<Buffer>;
  writeFile(path: string, data: string | Uint8Array, opts?: { mode?: number | string; parents?: boolean }): Promise<void>;
  mkdir(path: string, opts?: { mode?: number | string; parents?: boolean }): Promise<void>;
  move(from: string, to: string, opts?: { replace?: boolean; parents?: boolean }): Promise<void>;
  terminal(argv: string[], opts?: TerminalOptions): Promise<Terminal>;
  ports(): Promise<PortInfo[]>;
  previewUrl(port: number): string | null;
  publishPort(port: number, opts?: { hostPort?: number; hostIp?: string }): Promise<PortInfo>;
  unpublishPort(port: number): Promise<void>;
  downloadTree(path?: string): Promise<Buffer>;
  uploadTree(path: string, tar: Uint8Array, opts?: { parents?: boolean }): Promise<void>;
  removeFile(path: string): Promise<void>;
  listFiles(path?: string, opts?: { recursive?: boolean; depth?: number }): Promise<FileInfo[]>;
  stat(path: string): Promise<FileInfo>;
  exists(path: string): Promise<boolean>;
  snapshot(snapshot: string): Promise<void>;
  restore(snapshot: string): Promise<void>;
  diff(): Promise<Change[]>;
  apply(opts?: { paths?: string[]; force?: boolean }): Promise<unknown>;
  audit(opts?: { limit?: number }): Promise<Record<string, unknown>[]>;
  processes(): Promise<ProcessInfo[]>;
  process(id: number): Promise<ProcessInfo | { id: number; running: false; outcome: Record<string, unknown> }>;
  wait(id: number): Promise<Outcome>;
  kill(id: number, opts?: { signal?: string; graceMs?: number }): Promise<void>;
  output(id: number, opts?: { follow?: boolean }): AsyncGenerator<StreamEvent>;
  stop(): Promise<void>;
  delete(): Promise<void>;
}
