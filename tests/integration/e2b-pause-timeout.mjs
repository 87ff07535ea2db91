// SPDX-License-Identifier: LGPL-2.1-or-later
// A command's timeoutMs across E2B's pause, with the real `e2b` SDK
// against hutch serve --e2b (test_e2b_pause_timeout.py). Usage: node
// e2b-pause-timeout.mjs MARKER pause|nopause; E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY in the environment. Starts `sleep 40`
// (its command line holds MARKER) with timeoutMs 3000; with "pause" it
// pauses the sandbox at once, prints {"phase":"paused"}, waits for one
// line on stdin, stays paused 5 s more, connects and looks whether the
// command still runs; then waits for the command's end and prints the
// final JSON: the error its wait() gave and how long it ran after the
// resume.
import { Sandbox } from 'e2b';
import readline from 'node:readline';

const marker = process.argv[2];
const mode = process.argv[3];
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errName = (e) => (e && e.constructor ? e.constructor.name : String(e));

const rl = readline.createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const sbx = await Sandbox.create('base', { timeoutMs: 300000 });
try {
  const h = await sbx.commands.run(`sleep 40; true # ${marker}`, { background: true, timeoutMs: 3000 });
  out.pid = h.pid;
  let wait = h;
  let from = Date.now();
  if (mode === 'pause') {
    out.paused = await sbx.pause();
    console.log(JSON.stringify({ phase: 'paused', ...out }));
    await lines.next();
    await sleep(5000);
    const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 300000 });
    from = Date.now();
    out.runningAfterResume = (await again.commands.list()).some((p) => p.pid === out.pid);
    if (out.runningAfterResume) wait = await again.commands.connect(out.pid, { timeoutMs: 0 });
  }
  out.end = await wait.wait().then((r) => `exited ${r.exitCode}`,
    (e) => `${errName(e)}: ${e.message}`);
  out.ranMs = Date.now() - from;
  // The SDK's own timer may end wait() first: the command's end is the
  // server's (listed no more).
  const end = Date.now() + 60000;
  do {
    out.listedAtEnd = (await sbx.commands.list()).some((p) => p.pid === out.pid);
    if (out.listedAtEnd) await sleep(100);
  } while (out.listedAtEnd && Date.now() < end);
  out.goneMs = Date.now() - from;
} catch (e) {
  out.error = `${errName(e)}: ${e.message}`;
} finally {
  rl.close();
  await sbx.kill();
}
console.log(JSON.stringify(out));
