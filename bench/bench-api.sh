#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-api.sh: the round trip of one exec (`true` in a running
# persistent sandbox) through the HTTP API of `hutch serve` (unix socket,
# keep-alive), through `hutch exec`, and through the in-process C API
# (hutch_exec() of libhutch). See bench/README.md.
# Usage: bench/bench-api.sh [CALLS] [ROUNDS]     # default 1000 calls, 5 rounds
set -euo pipefail

cd "$(dirname "$0")/.."

calls=${1:-1000}
rounds=${2:-5}
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
# exec through Client.exec(), one microsecond count per line.
py_client() { # COUNT
        PYTHONPATH=$PWD/clients/python python3 - "$sock" "$name" "$1" <<'PY'
import sys, time
import hutch
c = hutch.Client(socket=sys.argv[1])
for _ in range(int(sys.argv[3])):
    t = time.perf_counter_ns()
    c.exec(sys.argv[2], ["true"])
    print((time.perf_counter_ns() - t) // 1000)
PY
}
ts_client() { # COUNT
        node --input-type=module - "$sock" "$name" "$1" "$PWD/clients/typescript/index.js" <<'JS'
const [sock, name, n, lib] = process.argv.slice(2);
const { HutchClient } = await import(lib);
const c = new HutchClient({ socket: sock });
const out = [];
for (let i = 0; i < Number(n); i++) {
  const t = process.hrtime.bigint();
  await c.exec(name, ["true"]);
  out.push(String((process.hrtime.bigint() - t) / 1000n));
}
console.log(out.join("\n"));
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
                run_mode "$m" "$per_round" >>"$work/$m.us"
        done
done

echo "kernel $(uname -r), $(nproc) cpus, $((per_round * rounds)) exec round trips per path ($rounds interleaved rounds)"
python3 - "$work" "${modes[@]}" <<'EOF'
import statistics
import sys

work, modes = sys.argv[1], sys.argv[2:]
labels = {"api": "API (unix socket)", "cli": "hutch exec", "capi": "C API in process",
          "py": "Python client", "ts": "TypeScript client"}
p50 = {}
print(f"{'path':<20} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'min ms':>8}")
for m in modes:
    xs = sorted(int(x) / 1000 for x in open(f"{work}/{m}.us"))
    pct = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]
    p50[m] = pct(0.50)
    print(f"{labels[m]:<20} {pct(0.50):8.3f} {pct(0.99):8.3f} {statistics.mean(xs):8.3f} {xs[0]:8.3f}")
print(f"API - C API, p50: {p50['api'] - p50['capi']:+.3f} ms (target: under 1 ms)")
for m in ("py", "ts"):
    if m in p50:
        print(f"{labels[m]} - API, p50: {p50[m] - p50['api']:+.3f} ms (target: under 0.3 ms)")
EOF
