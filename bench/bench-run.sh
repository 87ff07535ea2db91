#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-run.sh: wall time of `hutch run -- /bin/true` side by side
# with bubblewrap and unshare(1) doing a comparable one-shot sandbox. See
# bench/README.md. Usage: bench/bench-run.sh [ROUNDS] [RUNS_PER_ROUND]
set -euo pipefail

cd "$(dirname "$0")/.."

rounds=${1:-10}
runs=${2:-50}

tools/deps.sh bench

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build >/dev/null

hutch=$PWD/build/hutch
if [ ! -x "$hutch" ]; then
        hutch=$PWD/build/src/cli/hutch
fi

# hutch-limits: the limit machinery of issue #3 on top of the default
# run (which already has a cgroup with the default memory and pids limits).
names=(hutch hutch-limits bwrap unshare)
cmds=(
        "$hutch run -- /bin/true"
        "$hutch run --memory 256m --pids 64 --timeout 10s -- /bin/true"
        "bwrap --unshare-all --die-with-parent --ro-bind / / --tmpfs /tmp --proc /proc --dev /dev --cap-drop ALL /bin/true"
        "unshare -U -r -m -p -f -n -i -u /bin/true"
)

# Each command must work before it is timed.
for i in "${!cmds[@]}"; do
        # Word splitting of the command line is intended here.
        # shellcheck disable=SC2086
        if ! ${cmds[$i]}; then
                echo "bench: '${cmds[$i]}' does not run here" >&2
                exit 1
        fi
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# hyperfine runs its commands one after the other, so a drift of the
# machine (frequency, page cache, other load) would favour one of them.
# Several rounds with the order rotated interleave them; the medians are
# over all samples of all rounds.
for round in $(seq 1 "$rounds"); do
        args=()
        n=${#cmds[@]}
        for k in $(seq 0 $((n - 1))); do
                i=$(((k + round) % n))
                args+=(--command-name "${names[$i]}" "${cmds[$i]}")
        done
        warmup=10
        if [ "$round" -eq 1 ]; then
                warmup=20
        fi
        echo "round $round/$rounds" >&2
        if ! hyperfine -N --style none --warmup "$warmup" --runs "$runs" \
                --export-json "$out/round-$round.json" "${args[@]}" \
                >"$out/round-$round.log" 2>&1; then
                cat "$out/round-$round.log" >&2
                exit 1
        fi
done

result=build/bench-run.json
/usr/bin/python3 - "$out" "$result" "$rounds" "$runs" <<'PYEOF'
import json
import os
import pathlib
import statistics
import sys

out, result, rounds, runs = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
samples, commands = {}, {}
for f in sorted(out.glob("round-*.json")):
    for r in json.loads(f.read_text())["results"]:
        samples.setdefault(r["command"], []).extend(r["times"])
order = ["hutch", "hutch-limits", "bwrap", "unshare"]
rows = []
for name in order:
    t = samples[name]
    s = sorted(t)
    rows.append(
        {
            "name": name,
            "samples": len(t),
            "median_ms": statistics.median(t) * 1000,
            "p90_ms": s[int(0.9 * (len(s) - 1))] * 1000,
            "mean_ms": statistics.fmean(t) * 1000,
            "stddev_ms": statistics.stdev(t) * 1000,
            "min_ms": min(t) * 1000,
            "times": t,
        }
    )
bw = next(r for r in rows if r["name"] == "bwrap")
for r in rows:
    r["ratio_vs_bwrap"] = r["median_ms"] / bw["median_ms"]
    r["p90_ratio_vs_bwrap"] = r["p90_ms"] / bw["p90_ms"]
pathlib.Path(result).write_text(json.dumps({"rounds": int(rounds), "runs_per_round": int(runs), "results": rows}, indent=2) + "\n")

uname = os.uname()
print(f"kernel {uname.release}, {os.cpu_count()} cpus, {rounds} rounds x {runs} runs per command (interleaved)")
print(f"{'command':<13} {'median ms':>10} {'p90 ms':>8} {'mean ms':>10} {'stddev':>8} {'min ms':>8}"
      f" {'vs bwrap':>9} {'p90 vs bwrap':>13}")
for r in rows:
    print(
        f"{r['name']:<13} {r['median_ms']:>10.2f} {r['p90_ms']:>8.2f} {r['mean_ms']:>10.2f}"
        f" {r['stddev_ms']:>8.2f} {r['min_ms']:>8.2f} {r['ratio_vs_bwrap']:>8.2f}x"
        f" {r['p90_ratio_vs_bwrap']:>12.2f}x"
    )
print(f"samples: {result}")
PYEOF
