// SPDX-License-Identifier: LGPL-2.1-or-later
// bench/bench-e2b.mjs: the real e2b SDK against `hutch serve --e2b` (run by
// bench/bench-e2b.sh, which sets E2B_SDK and the SDK's E2B_* variables):
// the p50 and p90 of Sandbox.create() + commands.run("true") + kill(), and
// of commands.run("true") in a running sandbox, with the rows that split
// the latter into its parts (README "Benchmarks", issue 20):
//   - files.exists("/"): the SDK's Connect round trip (a unary Stat) that
//     starts nothing: the client's and the server's cost of one call;
//   - a process Start of /bin/true through the SDK's own envd client
//     (commands.run without its shell): the streamed call and one exec;
//   - commands.run("true"): what the SDK really sends, /bin/bash -l -c true;
//   - inside the sandbox, timed there in a loop (no client, no server):
//     `/bin/bash -l -c true` (the login shell's own cost: the host base's
//     /etc/profile) and `/bin/true` (one fork + exec), per call.
// Last, the floor under commands.run("true") that no server can go below on
// this machine: the Connect round trip with nothing started plus the login
// shell's own time (the two happen one after the other: the shell starts
// once the request is in and the client has its answer once the shell has
// ended), and what the server adds above it (its exec path: the keeper, the
// sandbox's init, the streamed frames).
// The per-call rows run interleaved (one of each in turn), so that a
// loaded machine weighs on them alike; "client CPU" is node's own CPU
// time per call (the SDK's client: undici, Connect, streams).
import { pathToFileURL } from "node:url";

const { Sandbox } = await import(pathToFileURL(process.env.E2B_SDK).href);
const rounds = Number(process.argv[2] || 20);
const runs = Number(process.argv[3] || 200);
// The in-sandbox loops: LOOPS samples of LOOP_N calls each.
const LOOPS = 10;
const LOOP_N = 50;

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))];
}

function row(label, xs, cpu) {
  const c = cpu === undefined ? "" : `   client CPU ${cpu.toFixed(1).padStart(5)} ms`;
  console.log(
    `${label.padEnd(44)} p50 ${pct(xs, 50).toFixed(2).padStart(7)} ms   p90 ${pct(xs, 90)
      .toFixed(2)
      .padStart(7)} ms   (n=${xs.length})${c}`,
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

// The SDK's own envd process client (what commands.run calls, minus the
// shell it wraps the command in).
async function startTrue() {
  for await (const _ of sbx.commands.rpc.start({ process: { cmd: "/bin/true", args: [], envs: {} } }, {}))
    ;
}

const cases = [
  ["commands.run(true), running sandbox", () => sbx.commands.run("true")],
  ["  files.exists(/): Connect round trip", () => sbx.files.exists("/")],
  ["  process Start /bin/true (no shell)", startTrue],
];
const times = cases.map(() => []);
const cpu = cases.map(() => 0);
for (let i = 0; i < runs; i++) {
  for (let k = 0; k < cases.length; k++) {
    const c0 = process.cpuUsage();
    const t = performance.now();
    await cases[k][1]();
    times[k].push(performance.now() - t);
    const c = process.cpuUsage(c0);
    cpu[k] += (c.user + c.system) / 1000;
  }
}
cases.forEach(([label], k) => row(label, times[k], cpu[k] / runs));

// Inside the sandbox: LOOP_N calls timed by the sandbox's own clock, per call.
async function inside(cmd) {
  const script =
    `s=$(date +%s%N); for i in $(seq ${LOOP_N}); do ${cmd}; done; ` +
    `e=$(date +%s%N); echo $(( (e - s) / ${LOOP_N} ))`;
  const r = await sbx.commands.run(script);
  return Number(r.stdout.trim()) / 1e6;
}
const login = [];
const bare = [];
for (let i = 0; i < LOOPS; i++) {
  login.push(await inside("/bin/bash -l -c true"));
  bare.push(await inside("/bin/true"));
}
row(`  in the sandbox: bash -l -c true (x${LOOP_N})`, login);
row(`  in the sandbox: /bin/true (x${LOOP_N})`, bare);
const floor = pct(times[1], 50) + pct(login, 50);
console.log(
  `floor: Connect round trip + login shell        ${floor.toFixed(2).padStart(7)} ms` +
    `   server's exec path above it ${(pct(times[0], 50) - floor).toFixed(2)} ms (p50s)`,
);
await sbx.kill();
