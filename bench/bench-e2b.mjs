// SPDX-License-Identifier: LGPL-2.1-or-later
// bench/bench-e2b.mjs: the real e2b SDK against `hutch serve --e2b` (run by
// bench/bench-e2b.sh, which sets E2B_SDK and the SDK's E2B_* variables):
// the p50 and p90 of Sandbox.create() + commands.run("true") + kill(), and
// of commands.run("true") in a running sandbox.
import { pathToFileURL } from "node:url";

const { Sandbox } = await import(pathToFileURL(process.env.E2B_SDK).href);
const rounds = Number(process.argv[2] || 20);
const runs = Number(process.argv[3] || 200);

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))];
}

function row(label, xs) {
  console.log(
    `${label.padEnd(40)} p50 ${pct(xs, 50).toFixed(1).padStart(7)} ms   p90 ${pct(xs, 90)
      .toFixed(1)
      .padStart(7)} ms   (n=${xs.length})`,
  );
}

const whole = [];
for (let i = 0; i < rounds; i++) {
  const t = performance.now();
  const sbx = await Sandbox.create();
  await sbx.commands.run("true");
  await sbx.kill();
  whole.push(performance.now() - t);
}
row("create + commands.run(true) + kill", whole);

const sbx = await Sandbox.create();
await sbx.commands.run("true");
const one = [];
for (let i = 0; i < runs; i++) {
  const t = performance.now();
  await sbx.commands.run("true");
  one.push(performance.now() - t);
}
await sbx.kill();
row("commands.run(true), running sandbox", one);
