// SPDX-License-Identifier: LGPL-2.1-or-later
// E2B's kill with the real `e2b` SDK against hutch serve --e2b
// (test_e2b_kill.py). Usage: node e2b-kill.mjs MARKER; E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY in the environment. Starts processes
// whose command lines hold MARKER (a background command, one that ignores
// SIGTERM and SIGHUP, a child of a third in a session of its own), prints
// {"phase":"started"} and waits for a line on stdin (the test finds them
// on the host), kills the sandbox, prints {"phase":"killed",...} and
// waits for another line (the test looks at the host the moment kill()
// has returned), then prints its final JSON.
import { Sandbox } from 'e2b';
import readline from 'node:readline';

const marker = process.argv[2];
const out = {};
const errName = (e) => (e && e.constructor ? e.constructor.name : String(e));
const rl = readline.createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const sbx = await Sandbox.create('base', { timeoutMs: 300000 });
try {
  await sbx.commands.run(`exec -a ${marker}-plain sleep 1000`, { background: true, timeoutMs: 0 });
  await sbx.commands.run(
    `trap '' TERM HUP; exec -a ${marker}-stubborn sleep 1000`, { background: true, timeoutMs: 0 });
  await sbx.commands.run(
    `setsid bash -c 'exec -a ${marker}-session sleep 1000' >/dev/null 2>&1 < /dev/null & wait`,
    { background: true, timeoutMs: 0 });
  console.log(JSON.stringify({ phase: 'started' }));
  await lines.next();
  out.kill = await sbx.kill();
  console.log(JSON.stringify({ phase: 'killed', kill: out.kill }));
  await lines.next();
  out.running = await sbx.isRunning();
  out.listed = (await (Sandbox.list()).nextItems()).map((s) => s.sandboxId);
  out.killAgain = await Sandbox.kill(sbx.sandboxId);
} catch (e) {
  out.error = `${errName(e)}: ${e.message}`;
}
rl.close();
console.log(JSON.stringify(out));
