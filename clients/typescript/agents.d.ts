// SPDX-License-Identifier: LGPL-2.1-or-later
// Types of hutch-client/agents: hutch as a sandbox of @openai/agents 0.20.x.
import type { Manifest, SandboxClient, SandboxSession, SandboxSessionState } from "@openai/agents/sandbox";
import type { HutchClient } from "./index.js";

export interface HutchSessionState extends SandboxSessionState {
  sandboxName: string;
  hostDir: string;
  environment: Record<string, string>;
}
export interface HutchSandboxClientOptions {
  client?: HutchClient;
  socket?: string;
  hutch?: string;
  /** Extra hutch policy (docs/policy.md): limits, allow_hosts, secrets... */
  policy?: Record<string, unknown>;
  options?: { policy?: Record<string, unknown>; allowHosts?: string[] };
}
export class HutchSandboxSession implements SandboxSession<HutchSessionState> {
  state: HutchSessionState;
  constructor(client: HutchClient, state: HutchSessionState);
}
export interface HutchSandboxSession extends Required<Pick<SandboxSession<HutchSessionState>,
  "exec" | "execCommand" | "writeStdin" | "readFile" | "listDir" | "pathExists" | "directoryExists" |
  "materializeEntry" | "applyManifest" | "createEditor" | "persistWorkspace" | "hydrateWorkspace" |
  "resolveExposedPort" | "supportsPty" | "running" | "stop" | "shutdown" | "delete" | "close">> {}
export class HutchSandboxClient implements SandboxClient<Record<string, unknown>, HutchSessionState> {
  readonly backendId: "hutch";
  readonly supportsDefaultOptions: true;
  constructor(opts?: HutchSandboxClientOptions);
  create(args?: unknown, manifestOptions?: Record<string, unknown>): Promise<HutchSandboxSession>;
  resume(state: HutchSessionState): Promise<HutchSandboxSession>;
  delete(state: HutchSessionState): Promise<void>;
  serializeSessionState(state: HutchSessionState): Promise<Record<string, unknown>>;
  deserializeSessionState(state: Record<string, unknown>): Promise<HutchSessionState>;
}
export type { Manifest };
