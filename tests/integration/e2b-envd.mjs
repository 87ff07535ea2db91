// SPDX-License-Identifier: LGPL-2.1-or-later
// The real `e2b` SDK against hutch serve --e2b's envd (test_e2b_envd.py).
// Usage: node e2b-envd.mjs SCENARIO [ARG]; E2B_API_URL, E2B_SANDBOX_URL and
// E2B_API_KEY in the environment. Prints one JSON object of what it saw;
// the Python side asserts on it. Each scenario makes its own sandbox and
// kills it at the end.
import { Sandbox, CommandExitError, TimeoutError, AuthenticationError, NotFoundError } from 'e2b';

const scenario = process.argv[2];
const arg = process.argv[3];
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errName = (e) => (e && e.constructor ? e.constructor.name : String(e));

// Waits until @pred() holds, at most @ms (events, not fixed sleeps).
async function until(pred, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(50);
  }
  return false;
}

async function create() {
  return await Sandbox.create('base', { timeoutMs: 300000 });
}

async function commands(sbx) {
  const r = await sbx.commands.run('echo hello; echo oops >&2; echo "$FOO"; pwd', {
    envs: { FOO: 'bar baz' },
    cwd: '/tmp',
  });
  out.run = { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
  try {
    await sbx.commands.run('echo partial; exit 3');
    out.fail = 'no error';
  } catch (e) {
    out.fail = { name: errName(e), isExit: e instanceof CommandExitError, exitCode: e.exitCode, stdout: e.stdout };
  }
  const t0 = Date.now();
  try {
    await sbx.commands.run('sleep 30', { timeoutMs: 1000 });
    out.timeout = 'no error';
  } catch (e) {
    out.timeout = { name: errName(e), isTimeout: e instanceof TimeoutError, fast: Date.now() - t0 < 20000 };
  }
  // A background command with stdin: what it reads comes back on onStdout.
  const seen = [];
  const h = await sbx.commands.run('read x; echo "got $x"; exec sleep 300', {
    background: true,
    stdin: true,
    onStdout: (d) => seen.push(d),
  });
  out.pid = h.pid;
  await sbx.commands.sendStdin(h.pid, 'ping\n');
  out.onStdout = await until(() => seen.join('').includes('got ping'));
  out.listed = (await sbx.commands.list()).some((p) => p.pid === h.pid && p.cmd === '/bin/bash');
  out.kill = await sbx.commands.kill(h.pid);
  try {
    await h.wait();
    out.afterKill = 'no error';
  } catch (e) {
    out.afterKill = { name: errName(e), error: e.error, exitCode: e.exitCode };
  }
  out.listedAfterKill = (await sbx.commands.list()).some((p) => p.pid === h.pid);
  out.killAgain = await sbx.commands.kill(h.pid);
  // closeStdin ends `cat`.
  const c = await sbx.commands.run('cat; echo done', { background: true, stdin: true });
  await sbx.commands.sendStdin(c.pid, 'line\n');
  await sbx.commands.closeStdin(c.pid);
  const cr = await c.wait();
  out.closeStdin = cr.stdout;
  // Input a command never reads is refused after a while, not buffered
  // without end (and the broker does not hang on it).
  const deaf = await sbx.commands.run('exec sleep 300', { background: true, stdin: true });
  try {
    await sbx.commands.sendStdin(deaf.pid, 'x'.repeat(300000));
    out.deaf = 'no error';
  } catch (e) {
    out.deaf = errName(e);
  }
  out.deafKill = await sbx.commands.kill(deaf.pid);
  // kill() ends what the command started too, not only the command.
  const fam = await sbx.commands.run('(exec -a famchild300 sleep 300) & wait', { background: true });
  const count = 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done | grep -c "^famchild300" || true';
  out.familyBefore = await until(async () => (await sbx.commands.run(count)).stdout.trim() === '1');
  out.killFamily = await sbx.commands.kill(fam.pid);
  await fam.wait().catch(() => {});
  out.familyAfter = await until(async () => (await sbx.commands.run(count)).stdout.trim() === '0');
  // Connect re-attaches to a running command's output.
  const ticks = await sbx.commands.run('while :; do echo tick; sleep 0.1; done', { background: true });
  await ticks.disconnect();
  const again = [];
  const re = await sbx.commands.connect(ticks.pid, { onStdout: (d) => again.push(d) });
  out.reattached = await until(() => again.join('').includes('tick'));
  out.killTicks = await sbx.commands.kill(re.pid);
  // The marker of a process that must not outlive the sandbox.
  if (arg) await sbx.commands.run(`${arg} 300`, { background: true });
}

async function pty(sbx) {
  let text = '';
  const dec = new TextDecoder();
  const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { text += dec.decode(d); } });
  const enc = new TextEncoder();
  await sbx.pty.sendInput(t.pid, enc.encode('stty size; tty; echo mark$((40+2))\n'));
  out.first = await until(() => text.includes('mark42'));
  out.size = text.includes('24 80');
  out.tty = /\/dev\/pts\/\d+/.test(text);
  await sbx.pty.resize(t.pid, { cols: 100, rows: 30 });
  await sbx.pty.sendInput(t.pid, enc.encode('stty size\n'));
  out.resized = await until(() => text.includes('30 100'));
  out.kill = await sbx.pty.kill(t.pid);
  try {
    await t.wait();
    out.afterKill = 'no error';
  } catch (e) {
    out.afterKill = { name: errName(e), error: e.error };
  }
  out.left = (await sbx.commands.list()).length;
}

async function files(sbx) {
  const f = sbx.files;
  const w = await f.write('/tmp/e2b/a.txt', 'alpha\n');
  out.write = { name: w.name, path: w.path, type: w.type };
  out.read = await f.read('/tmp/e2b/a.txt');
  const bytes = new Uint8Array([0, 1, 2, 255, 10]);
  await f.write('/tmp/e2b/bin', bytes, { useOctetStream: true });
  out.readBytes = Array.from(await f.read('/tmp/e2b/bin', { format: 'bytes' }));
  // A stream: octet-stream with a chunked body.
  const enc = new TextEncoder();
  const stream = new ReadableStream({
    start(c) { c.enqueue(enc.encode('part1-')); c.enqueue(enc.encode('part2')); c.close(); },
  });
  await f.write('/tmp/e2b/streamed', stream);
  out.streamed = await f.read('/tmp/e2b/streamed');
  await f.remove('/tmp/e2b/streamed');
  const many = await f.write([
    { path: '/tmp/e2b/m1', data: 'one' },
    { path: '/tmp/e2b/m2', data: 'two' },
  ]);
  out.many = many.map((e) => e.path);
  out.list = (await f.list('/tmp/e2b')).map((e) => [e.name, e.type, e.path]);
  await f.makeDir('/tmp/e2b/sub/deeper');
  out.listDeep = (await f.list('/tmp/e2b', { depth: 3 })).map((e) => e.path);
  out.exists = [await f.exists('/tmp/e2b/a.txt'), await f.exists('/tmp/e2b/none')];
  out.makeDir = [await f.makeDir('/tmp/e2b/new'), await f.makeDir('/tmp/e2b/new')];
  const info = await f.getInfo('/tmp/e2b/a.txt');
  out.info = { name: info.name, type: info.type, size: info.size, mode: info.mode, permissions: info.permissions };
  const mv = await f.rename('/tmp/e2b/a.txt', '/tmp/e2b/new/b.txt');
  out.rename = { path: mv.path, old: await f.exists('/tmp/e2b/a.txt'), read: await f.read('/tmp/e2b/new/b.txt') };
  await f.remove('/tmp/e2b/sub');
  out.removed = !(await f.exists('/tmp/e2b/sub'));
  try {
    await f.read('/tmp/e2b/none');
    out.readMissing = 'no error';
  } catch (e) {
    out.readMissing = errName(e);
  }
  // watchDir: a file made, written and removed shows up as events.
  const events = [];
  const wh = await f.watchDir('/tmp/e2b/new', (e) => events.push(`${e.type}:${e.name}`));
  await f.write('/tmp/e2b/new/w.txt', 'w');
  out.watchCreate = await until(() => events.includes('create:w.txt'));
  await f.remove('/tmp/e2b/new/w.txt');
  out.watchRemove = await until(() => events.includes('remove:w.txt'));
  await wh.stop();
  // Signed URLs: no token header, the signature names the sandbox.
  const down = await sbx.downloadUrl('/tmp/e2b/new/b.txt');
  const dres = await fetch(down);
  out.signedDown = { status: dres.status, text: await dres.text(), signed: down.includes('signature=') };
  const up = await sbx.uploadUrl('/tmp/e2b/up.txt');
  const form = new FormData();
  form.append('file', new Blob(['uploaded']), 'up.txt');
  const ures = await fetch(up, { method: 'POST', body: form });
  out.signedUp = { status: ures.status, read: ures.ok ? await f.read('/tmp/e2b/up.txt') : await ures.text() };
  const forged = await fetch(down.replace(/signature=[^&]+/, 'signature=v1_forged'));
  out.forged = forged.status;
  // A command sees what the files API wrote (one sandbox, one view).
  out.catBack = (await sbx.commands.run('cat /tmp/e2b/new/b.txt')).stdout;
}

// Containment: the SDK's commands run inside hutch's walls.
async function wall(sbx) {
  const [canary, port, marker] = arg.split(',');
  const r = await sbx.commands.run(`cat ${canary}`).catch((e) => e);
  out.canary = { exitCode: r.exitCode, stdout: r.stdout };
  const n = await sbx.commands
    .run(`timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/${port}' && echo connected`)
    .catch((e) => e);
  out.net = { exitCode: n.exitCode, stdout: n.stdout };
  await sbx.files.write(marker, 'inside');
  out.markerInside = await sbx.files.exists(marker);
}

// Access: a wrong token and an unknown sandbox, through the SDK.
async function access(sbx) {
  const bad = new Sandbox({
    sandboxId: sbx.sandboxId,
    envdVersion: '0.6.4',
    envdAccessToken: 'x'.repeat(43),
  });
  try {
    await bad.commands.run('true');
    out.wrongToken = 'no error';
  } catch (e) {
    out.wrongToken = errName(e);
  }
  try {
    await bad.files.read('/etc/hostname');
    out.wrongTokenFiles = 'no error';
  } catch (e) {
    out.wrongTokenFiles = errName(e);
  }
  const none = new Sandbox({ sandboxId: 'a'.repeat(20), envdVersion: '0.6.4', envdAccessToken: sbx.envdAccessToken });
  try {
    await none.commands.run('true');
    out.unknown = 'no error';
  } catch (e) {
    out.unknown = { name: errName(e), notFound: e instanceof NotFoundError };
  }
  out.authClass = AuthenticationError.name;
  out.running = await sbx.isRunning();
  out.unknownRunning = await none.isRunning();
}

// Killing the sandbox ends the streams open on it.
async function killstream(sbx) {
  const h = await sbx.commands.run('exec sleep 300', { background: true });
  const ended = h.wait().then(() => 'no error', (e) => errName(e));
  out.kill = await sbx.kill();
  let timer;
  const late = new Promise((r) => { timer = setTimeout(() => r('still open'), 60000); });
  out.ended = await Promise.race([ended, late]);
  clearTimeout(timer);
  out.running = await sbx.isRunning();
}

// Pausing the sandbox ends a watch (whose polling would otherwise start
// the stopped sandbox again) and the commands' streams.
async function pausewatch(sbx) {
  await sbx.files.makeDir('/tmp/pw');
  let exited;
  const exit = new Promise((r) => { exited = r; });
  await sbx.files.watchDir('/tmp/pw', () => {}, { onExit: (e) => exited(e ? errName(e) : 'clean') });
  const h = await sbx.commands.run('exec sleep 300', { background: true });
  const ended = h.wait().then(() => 'no error', (e) => errName(e));
  out.paused = await sbx.pause();
  let timer;
  const late = new Promise((r) => { timer = setTimeout(() => r('still open'), 60000); });
  out.watchEnded = await Promise.race([exit, late]);
  out.commandEnded = await Promise.race([ended, late]);
  clearTimeout(timer);
  out.running = await sbx.isRunning();
}

const scenarios = { commands, pty, files, wall, access, killstream, pausewatch };
const sbx = await create();
out.sandboxId = sbx.sandboxId;
out.envdAccessToken = sbx.envdAccessToken;
try {
  await scenarios[scenario](sbx);
} catch (e) {
  out.error = `${errName(e)}: ${e.message}`;
} finally {
  if (scenario !== 'keep') await sbx.kill();
}
console.log(JSON.stringify(out));
