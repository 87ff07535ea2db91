// SPDX-License-Identifier: LGPL-2.1-or-later
// A background command whose client went away (test_e2b_background.py),
// with the real `e2b` SDK. Usage: node e2b-background.mjs start | resume
// SANDBOX PID; E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY in the
// environment. Prints one JSON object.
//   start: makes a sandbox, starts a ticking background command and exits
//     without a word (the process ends: its connections close);
//   resume: connects to that sandbox, finds the command in the list,
//     re-attaches to its output by pid and reads on, kills it and the
//     sandbox.
import { Sandbox } from 'e2b';

const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(pred, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(50);
  }
  return false;
}

try {
  if (process.argv[2] === 'start') {
    const sbx = await Sandbox.create('base', { timeoutMs: 300000 });
    const seen = [];
    const h = await sbx.commands.run('n=0; while :; do n=$((n+1)); echo "tick $n"; sleep 0.1; done', {
      background: true,
      timeoutMs: 0,
      onStdout: (d) => seen.push(d),
    });
    out.sandbox = sbx.sandboxId;
    out.pid = h.pid;
    out.ticked = await until(() => seen.join('').includes('tick 2'));
  } else {
    const sbx = await Sandbox.connect(process.argv[3]);
    const pid = Number(process.argv[4]);
    out.listed = (await sbx.commands.list()).some((p) => p.pid === pid);
    const again = [];
    const re = await sbx.commands.connect(pid, { onStdout: (d) => again.push(d) });
    // Reads on: ticks numbered past the ones the first client saw.
    out.readOn = await until(() => /tick (\d{2,})/.test(again.join('')));
    out.kill = await sbx.commands.kill(re.pid);
    out.listedAfter = (await sbx.commands.list()).some((p) => p.pid === pid);
    await sbx.kill();
  }
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
}
console.log(JSON.stringify(out));
// The process ends here: for start, its stream is dropped, not closed.
process.exit(0);
