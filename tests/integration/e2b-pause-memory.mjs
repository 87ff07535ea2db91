// SPDX-License-Identifier: LGPL-2.1-or-later
// E2B's pause that keeps memory, with the real `e2b` SDK against hutch
// serve --e2b (test_e2b_pause_memory.py). Usage: node e2b-pause-memory.mjs
// MARKER; E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY in the environment.
// Starts a counter in the background (its command line holds MARKER),
// pauses the sandbox, prints {"phase":"paused",...} and waits for one
// line on stdin (the test looks at the host meanwhile), then connects
// and prints the final JSON: the counts before and after, whether the
// same command is still listed and counting.
import { Sandbox } from 'e2b';
import readline from 'node:readline';

const marker = process.argv[2];
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errName = (e) => (e && e.constructor ? e.constructor.name : String(e));

// The count (null when the file stays empty: a counter stopped between
// its truncate and its write).
async function count(sbx) {
  for (let i = 0; i < 40; i++) {
    const t = (await sbx.files.read('/root/count')).trim();
    if (t !== '') return Number(t);
    await sleep(25);
  }
  return null;
}

async function until(pred, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(50);
  }
  return false;
}

const rl = readline.createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const sbx = await Sandbox.create('base', { timeoutMs: 300000 });
try {
  // A counter that only counts when it runs (shell builtins only).
  const h = await sbx.commands.run(
    `i=0; while :; do i=$((i+1)); echo $i > /root/count; done # ${marker}`,
    { background: true, timeoutMs: 0 });
  out.pid = h.pid;
  await sbx.files.write('/root/kept.txt', 'kept\n');
  out.started = await until(async () => {
    try { return (await count(sbx)) > 100; } catch { return false; }
  });
  out.before = await count(sbx);
  out.paused = await sbx.pause();
  out.runningWhilePaused = await sbx.isRunning();
  out.listedState = (await (Sandbox.list({ query: { state: ['paused'] } })).nextItems())
    .map((s) => [s.sandboxId === sbx.sandboxId, s.state]);
  out.streamWhilePaused = await h.wait().then(() => 'ended', (e) => errName(e));
  console.log(JSON.stringify({ phase: 'paused', ...out }));
  await lines.next();
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 300000 });
  out.step = 'isRunning'; console.error('step', out.step);
  out.runningAfter = await again.isRunning();
  out.step = 'count'; console.error('step', out.step);
  out.after = await count(again);
  out.step = 'list'; console.error('step', out.step);
  out.stillListed = (await again.commands.list()).some((p) => p.pid === out.pid);
  out.step = 'counting'; console.error('step', out.step);
  out.counting = await until(async () => (await count(again)) > out.after + 100, 10000);
  out.step = 'kept'; console.error('step', out.step);
  out.kept = await again.files.read('/root/kept.txt');
} catch (e) {
  out.error = `${errName(e)}: ${e.message}`;
} finally {
  rl.close();
  await sbx.kill();
}
console.log(JSON.stringify(out));
