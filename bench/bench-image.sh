#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-image.sh: wall time of `hutch run --image busybox -- true`
# (the root an overlay of the image's layers over a tmpfs upper,
# docs/images-run.md) side by side with `hutch run -- true` on the host
# base, median and p90 over interleaved rounds. The image is the tests'
# busybox image (tests/integration/imageutil.py), built offline and
# imported into a store of the bench's own. See bench/README.md.
# Usage: bench/bench-image.sh [ROUNDS] [RUNS_PER_ROUND]
set -euo pipefail

cd "$(dirname "$0")/.."

rounds=${1:-10}
runs=${2:-50}

tools/deps.sh bench

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build >/dev/null

hutch=$PWD/build/src/cli/hutch

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export HUTCH_HOME=$out/home
mkdir -p "$HUTCH_HOME"

/usr/bin/python3 - "$out/layout" <<'PYEOF'
import sys
sys.path.insert(0, "tests/integration")
import imageutil
imageutil.write_oci_layout(sys.argv[1], imageutil.make_image(
    config={"Env": ["PATH=/bin"], "Cmd": ["/bin/true"]}), ref=None)
PYEOF
"$hutch" image import "$out/layout" busybox:latest >/dev/null 2>&1

names=(host-base image)
cmds=(
        "$hutch run -- true"
        "$hutch run --image busybox -- true"
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

# Rounds with the order rotated interleave the two (see bench-run.sh).
for round in $(seq 1 "$rounds"); do
        args=()
        n=${#cmds[@]}
        for k in $(seq 0 $((n - 1))); do
                i=$(((k + round) % n))
                args+=(--command-name "${names[$i]}" "${cmds[$i]}")
        done
        echo "round $round/$rounds" >&2
        if ! hyperfine -N --style none --warmup 10 --runs "$runs" \
                --export-json "$out/round-$round.json" "${args[@]}" \
                >"$out/round-$round.log" 2>&1; then
                cat "$out/round-$round.log" >&2
                exit 1
        fi
done

result=build/bench-image.json
/usr/bin/python3 - "$out" "$result" "$rounds" "$runs" <<'PYEOF'
import json
import os
import pathlib
import statistics
import sys

out, result, rounds, runs = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
samples = {}
for f in sorted(out.glob("round-*.json")):
    for r in json.loads(f.read_text())["results"]:
        samples.setdefault(r["command"], []).extend(r["times"])
rows = []
for name in ["host-base", "image"]:
    t = sorted(samples[name])
    rows.append({
        "name": name,
        "samples": len(t),
        "median_ms": statistics.median(t) * 1000,
        "p90_ms": t[int(0.9 * (len(t) - 1))] * 1000,
        "times": t,
    })
delta = rows[1]["median_ms"] - rows[0]["median_ms"]
pathlib.Path(result).write_text(json.dumps(
    {"rounds": int(rounds), "runs_per_round": int(runs), "results": rows,
     "image_minus_host_median_ms": delta}, indent=2) + "\n")
print(f"kernel {os.uname().release}, {os.cpu_count()} cpus, {rounds} rounds x {runs} runs "
      "per command (interleaved)")
print(f"{'command':<34} {'median ms':>10} {'p90 ms':>8}")
label = {"host-base": "hutch run -- true", "image": "hutch run --image busybox -- true"}
for r in rows:
    print(f"{label[r['name']]:<34} {r['median_ms']:>10.2f} {r['p90_ms']:>8.2f}")
print(f"image - host base, median: {delta:+.2f} ms")
print(f"samples: {result}")
PYEOF
