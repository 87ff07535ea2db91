// SPDX-License-Identifier: LGPL-2.1-or-later
// The real `e2b` SDK against `hutch serve --e2b` (test_e2b_control.py):
// node e2b-control.mjs STEP [JSON ARG]. The SDK module is $E2B_SDK (its
// dist/index.mjs); E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY and E2B_DOMAIN
// come from the environment, as a user of the SDK sets them. Each step
// prints one JSON line: what the SDK returned or the error it raised.
import http from "node:http";
import { pathToFileURL } from "node:url";

const e2b = await import(pathToFileURL(process.env.E2B_SDK).href);
const { Sandbox } = e2b;
const [step, raw] = process.argv.slice(2);
const arg = raw ? JSON.parse(raw) : {};

function info(i) {
  return {
    sandboxId: i.sandboxId,
    templateId: i.templateId,
    metadata: i.metadata,
    state: i.state,
    startedAt: i.startedAt.getTime(),
    endAt: i.endAt.getTime(),
    envdVersion: i.envdVersion,
  };
}

async function listAll(opts) {
  const out = [];
  const p = Sandbox.list(opts);
  while (p.hasNext) {
    for (const i of await p.nextItems()) out.push(info(i));
  }
  return out;
}

async function error(fn) {
  try {
    await fn();
    return { error: null };
  } catch (e) {
    return { error: e.constructor.name, message: String(e.message) };
  }
}

// GET @path of the sandbox host @host through the envd listener.
function hostGet(host, path) {
  const u = new URL(process.env.E2B_SANDBOX_URL);
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: u.hostname, port: u.port, path, headers: { Host: host } },
      (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      },
    );
    req.on("error", reject);
  });
}

const steps = {
  // The whole round: create, commands, files, getHost, pause, connect, kill.
  async endToEnd() {
    const sbx = await Sandbox.create({ timeoutMs: 120000 });
    const out = {};
    const r = await sbx.commands.run('echo "$HOME"; pwd');
    out.run = { exitCode: r.exitCode, stdout: r.stdout };
    await sbx.files.write("/home/user/kept.txt", "kept across a pause\n");
    await sbx.commands.run(`python3 -m http.server 8000 --bind 127.0.0.1 --directory /home/user`, {
      background: true,
    });
    const host = sbx.getHost(8000);
    for (let i = 0; i < 300; i++) {
      try {
        const a = await hostGet(host, "/kept.txt");
        if (a.status === 200) {
          out.port = a;
          break;
        }
      } catch {}
      await new Promise((res) => setTimeout(res, 100));
    }
    out.paused = await sbx.pause();
    out.runningWhilePaused = await sbx.isRunning();
    const again = await Sandbox.connect(sbx.sandboxId);
    out.runningAfterConnect = await again.isRunning();
    out.read = await again.files.read("/home/user/kept.txt");
    out.killed = await again.kill();
    out.runningAfterKill = await again.isRunning().catch((e) => e.constructor.name);
    return out;
  },
  // Sandbox.create with @arg's options; the sandbox stays.
  async create() {
    const { template, ...opts } = arg;
    const sbx = template ? await Sandbox.create(template, opts) : await Sandbox.create(opts);
    return {
      sandboxId: sbx.sandboxId,
      envdAccessToken: sbx.envdAccessToken ?? null,
      host8000: sbx.getHost(8000),
      info: info(await sbx.getInfo()),
    };
  },
  async createError() {
    const { template, ...opts } = arg;
    return error(() => (template ? Sandbox.create(template, opts) : Sandbox.create(opts)));
  },
  async snapshot() {
    return Sandbox.createSnapshot(arg.id, arg.opts ?? {});
  },
  async metrics() {
    return Sandbox.getMetrics(arg.id);
  },
  async metricsError() {
    return error(() => Sandbox.getMetrics(arg.id));
  },
  async info() {
    return info(await Sandbox.getInfo(arg.id));
  },
  async infoError() {
    return error(() => Sandbox.getInfo(arg.id));
  },
  async list() {
    return listAll(arg);
  },
  // Pages of @arg.limit: the ids page by page.
  async pages() {
    const pages = [];
    const p = Sandbox.list(arg);
    while (p.hasNext) pages.push((await p.nextItems()).map((i) => i.sandboxId));
    return pages;
  },
  async listError() {
    return error(() => listAll(arg));
  },
  async setTimeout() {
    await Sandbox.setTimeout(arg.id, arg.ms);
    return info(await Sandbox.getInfo(arg.id));
  },
  async setTimeoutError() {
    return error(() => Sandbox.setTimeout(arg.id, arg.ms));
  },
  async kill() {
    return { killed: await Sandbox.kill(arg.id) };
  },
  async pause() {
    return { paused: await Sandbox.pause(arg.id) };
  },
  async connect() {
    const sbx = await Sandbox.connect(arg.id, arg.opts ?? {});
    return { sandboxId: sbx.sandboxId, info: info(await sbx.getInfo()) };
  },
  async connectError() {
    return error(() => Sandbox.connect(arg.id));
  },
};

if (!steps[step]) {
  console.error(`unknown step ${step}`);
  process.exit(2);
}
console.log(JSON.stringify(await steps[step]()));
