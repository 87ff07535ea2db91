// SPDX-License-Identifier: LGPL-2.1-or-later
// The SDK side of bench-e2b-envd.py: N x commands.run("true") in one
// running sandbox (made once, before the first sample), and N x
// Sandbox create + commands.run("true") + kill. Prints the samples (ms).
import { Sandbox } from 'e2b';

const n = Number(process.argv[2] || 200);
const rounds = Number(process.argv[3] || 20);

async function create() {
  const res = await fetch(`${process.env.E2B_API_URL}/sandboxes`, {
    method: 'POST',
    headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', timeout: 600 }),
  });
  const info = await res.json();
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(info)}`);
  return new Sandbox({ sandboxId: info.sandboxID, envdVersion: info.envdVersion,
                       envdAccessToken: info.envdAccessToken, apiKey: process.env.E2B_API_KEY });
}

const run = [];
const sbx = await create();
for (let i = 0; i < 10; i++) await sbx.commands.run('true');
for (let i = 0; i < n; i++) {
  const t = process.hrtime.bigint();
  await sbx.commands.run('true');
  run.push(Number(process.hrtime.bigint() - t) / 1e6);
}
await sbx.kill();
const whole = [];
for (let i = 0; i < rounds; i++) {
  const t = process.hrtime.bigint();
  const s = await create();
  await s.commands.run('true');
  await s.kill();
  whole.push(Number(process.hrtime.bigint() - t) / 1e6);
}
console.log(JSON.stringify({ run, whole }));
