#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Start-up cost of a sandbox with one secret (CA generation and the CA
# round trip included) against the same allowlist without a secret, and
# against no network at all. Target (issue 5): secret within 5 ms of allow.
#
#   bench/bench-secrets.sh [RUNS] [ROUNDS]   # default 100 runs per command
#                                            # in 5 rounds; HUTCH=path/to/hutch
#
# The rounds rotate the order of the three commands, so that a drift of
# the machine favours none of them; the medians are over all samples.
set -eu
runs=${1:-100}
rounds=${2:-5}
hutch=${HUTCH:-build/src/cli/hutch}
export BENCH_TOKEN=sk-proj-benchmarkvalue0123456789abcdefXYZ
per_round=$(((runs + rounds - 1) / rounds))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cmd() {
        case $1 in
        none) echo "$hutch run -- /bin/true" ;;
        allow) echo "$hutch run --allow-host api.example.com -- /bin/true" ;;
        secret) echo "$hutch run --secret BENCH_TOKEN@api.example.com -- /bin/true" ;;
        esac
}

# bench_round N NAME NAME NAME: one hyperfine run of the three, in order.
bench_round() {
        n=$1
        shift
        echo "round $n/$rounds" >&2
        hyperfine -N --style none -w 10 -r "$per_round" --export-json "$out/round-$n.json" \
                -n "$1" "$(cmd "$1")" -n "$2" "$(cmd "$2")" -n "$3" "$(cmd "$3")" \
                >"$out/round-$n.log" 2>&1 || {
                cat "$out/round-$n.log" >&2
                exit 1
        }
}

round=1
while [ "$round" -le "$rounds" ]; do
        case $((round % 3)) in
        0) bench_round "$round" none allow secret ;;
        1) bench_round "$round" allow secret none ;;
        *) bench_round "$round" secret none allow ;;
        esac
        round=$((round + 1))
done

/usr/bin/python3 - "$out" <<'PYEOF'
import json
import pathlib
import statistics
import sys

samples = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("round-*.json")):
    for r in json.loads(f.read_text())["results"]:
        samples.setdefault(r["command"], []).extend(r["times"])
med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
print(f"{'command':<8} {'median ms':>10} {'mean ms':>9} {'min ms':>8} {'samples':>8}")
for k in ("none", "allow", "secret"):
    t = samples[k]
    print(f"{k:<8} {med[k]:>10.2f} {statistics.fmean(t) * 1000:>9.2f} {min(t) * 1000:>8.2f} {len(t):>8}")
print(f"secret - allow: {med['secret'] - med['allow']:+.2f} ms (target: at most +5)")
print(f"secret - none:  {med['secret'] - med['none']:+.2f} ms")
PYEOF
