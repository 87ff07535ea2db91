#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-api.sh: the round trip of one exec (`true` in a running
# persistent sandbox) through the HTTP API of `hutch serve` (unix socket,
# keep-alive), through `hutch exec`, and through the in-process C API
# (hutch_exec() of libhutch). See bench/README.md.
# Usage: bench/bench-api.sh [CALLS] [ROUNDS]     # default 1000 calls, 10 rounds
set -euo pipefail

cd "$(dirname "$0")/.."

calls=${1:-1000}
rounds=${2:-10}
per_round=$((calls / rounds))

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build >/dev/null

hutch=$PWD/build/hutch
if [ ! -x "$hutch" ]; then
        hutch=$PWD/build/src/cli/hutch
fi
client=$PWD/build/bench/bench-api

work=$(mktemp -d)
export HUTCH_HOME=$work/home HUTCH_STATE_DIR=$work/state HUTCH_BINARY=$hutch
mkdir -m 0700 "$HUTCH_HOME" "$HUTCH_STATE_DIR"
name=bench-api
serve_pid=

cleanup() {
        if [ -n "$serve_pid" ]; then
                kill "$serve_pid" 2>/dev/null || true
                wait "$serve_pid" 2>/dev/null || true
        fi
        "$hutch" rm --force "$name" >/dev/null 2>&1 || true
        rm -rf "$work"
}
trap cleanup EXIT

"$hutch" create "$name" >/dev/null
coproc SERVE { exec "$hutch" serve 2>"$work/serve.log"; }
# coproc sets SERVE_PID.
# shellcheck disable=SC2153
serve_pid=$SERVE_PID
if ! read -r -t 30 line <&"${SERVE[0]}" || [ "${line#listening on unix:}" = "$line" ]; then
        echo "bench: hutch serve did not start: $(cat "$work/serve.log")" >&2
        exit 1
fi
sock=${line#listening on unix:}

# The Python and TypeScript clients (clients/, docs/clients.md): the same
# exec through Client.exec(), one microsecond count per line; the client
# process's CPU time (user + system) per call, in microseconds, is
# appended to $work/MODE.cpu: less at the mercy of other load than the
# wall time, it is what the client itself costs.
py_client() { # COUNT
        PYTHONPATH=$PWD/clients/python python3 - "$sock" "$name" "$1" "$work/py.cpu" <<'PY'
import sys, time
import hutch
c = hutch.Client(socket=sys.argv[1])
n = int(sys.argv[3])
cpu = time.process_time_ns()
for _ in range(n):
    t = time.perf_counter_ns()
    c.exec(sys.argv[2], ["true"])
    print((time.perf_counter_ns() - t) // 1000)
with open(sys.argv[4], "a") as f:
    print((time.process_time_ns() - cpu) // 1000 // n, file=f)
PY
}
ts_client() { # COUNT
        node --input-type=module - "$sock" "$name" "$1" "$PWD/clients/typescript/index.js" \
                "$work/ts.cpu" <<'JS'
import { appendFileSync } from "node:fs";
const [sock, name, n, lib, cpuFile] = process.argv.slice(2);
const { HutchClient } = await import(lib);
const c = new HutchClient({ socket: sock });
const out = [];
const cpu = process.cpuUsage();
for (let i = 0; i < Number(n); i++) {
  const t = process.hrtime.bigint();
  await c.exec(name, ["true"]);
  out.push(String((process.hrtime.bigint() - t) / 1000n));
}
const used = process.cpuUsage(cpu);
appendFileSync(cpuFile, `${Math.trunc((used.user + used.system) / Number(n))}\n`);
console.log(out.join("\n"));
await c.close();
JS
}

modes=(api cli capi py)
if command -v node >/dev/null; then
        modes+=(ts)
fi
run_mode() { # MODE COUNT
        case $1 in
        api) "$client" http "$sock" "$name" "$2" ;;
        cli) "$client" cli "$hutch" "$name" "$2" ;;
        capi) "$client" capi "$name" "$2" ;;
        py) py_client "$2" ;;
        ts) ts_client "$2" ;;
        esac
}

# The first exec starts the sandbox's keeper; then each path warms up.
for m in "${modes[@]}"; do
        run_mode "$m" 50 >/dev/null
done
# Rounds with the order rotated, so that a drift of the machine does not
# favour one path; the percentiles are over all samples.
for round in $(seq 1 "$rounds"); do
        n=${#modes[@]}
        for k in $(seq 0 $((n - 1))); do
                m=${modes[$(((k + round) % n))]}
                run_mode "$m" "$per_round" >"$work/$m.$round.us"
                cat "$work/$m.$round.us" >>"$work/$m.us"
        done
done

echo "kernel $(uname -r), $(nproc) cpus, $((per_round * rounds)) exec round trips per path ($rounds interleaved rounds)"
python3 - "$work" "$rounds" "${modes[@]}" <<'EOF'
import statistics
import sys

work, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
labels = {"api": "API (unix socket)", "cli": "hutch exec", "capi": "C API in process",
          "py": "Python client", "ts": "TypeScript client"}


def load(path):
    return sorted(int(x) / 1000 for x in open(path))


def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# Each round's p50, per path: their spread is how far one run of this
# script may be from the next.
med = {m: [pct(load(f"{work}/{m}.{r}.us"), 0.5) for r in range(1, rounds + 1)] for m in modes}
p50 = {}
print(f"{'path':<20} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'min ms':>8}"
      f"  {'round p50s ms':>16}")
for m in modes:
    xs = load(f"{work}/{m}.us")
    p50[m] = pct(xs, 0.50)
    spread = f"{min(med[m]):.3f}..{max(med[m]):.3f}"
    print(f"{labels[m]:<20} {pct(xs, 0.5):8.3f} {pct(xs, 0.9):8.3f} {pct(xs, 0.99):8.3f} "
          f"{statistics.mean(xs):8.3f} {xs[0]:8.3f}  {spread:>16}")
print(f"API - C API, p50: {p50['api'] - p50['capi']:+.3f} ms (target: under 1 ms)")
for m in ("py", "ts"):
    if m in p50:
        # The same difference in each round (the paths ran back to back
        # there): its spread says whether the overall one can be trusted.
        d = sorted(a - b for a, b in zip(med[m], med["api"]))
        print(f"{labels[m]} - API, p50: {p50[m] - p50['api']:+.3f} ms (target: under 0.3 ms; "
              f"per round {d[0]:+.3f}..{d[-1]:+.3f}, median {statistics.median(d):+.3f})")
        # The warm-up's line first, then one a round.
        cpu = sorted(int(x) for x in open(f"{work}/{m}.cpu").read().split()[1:])
        print(f"{labels[m]} CPU per call: median {statistics.median(cpu):.0f} us "
              f"(rounds {cpu[0]}..{cpu[-1]} us; the process's user + system time)")
EOF
