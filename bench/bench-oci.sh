#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-oci.sh: wall time of `podman run --rm IMG true` with
# --runtime hutch-oci against Debian's crun and runc (issue 21, docs/oci.md),
# interleaved rounds, medians. Podman runs with its own --root/--runroot
# (nothing of the system's storage is used) and cgroupfs; the image is
# Debian's static busybox, imported offline. A runtime that refuses to run
# here (crun on a hybrid cgroup v1 + v2 host) or is not installed (crun is
# not in tools/deps.sh: installed, it becomes podman's default runtime) gets
# a row saying so.
# Usage: bench/bench-oci.sh [ROUNDS] [RUNS_PER_ROUND]
set -euo pipefail

cd "$(dirname "$0")/.."

rounds=${1:-5}
runs=${2:-10}

tools/deps.sh bench

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build >/dev/null
oci=$PWD/build/src/oci/hutch-oci

work=$(mktemp -d /tmp/hutch-bench-oci.XXXXXX)
pm=(podman --root "$work/root" --runroot "$work/run" --tmpdir "$work/tmp"
        --cgroup-manager cgroupfs --events-backend file)
cleanup() {
        "${pm[@]}" rm -af >/dev/null 2>&1 || true
        "${pm[@]}" system reset -f >/dev/null 2>&1 || true
        rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

# The image: busybox and a few links, nothing else.
mkdir -p "$work/img/bin" "$work/img/proc" "$work/img/dev" "$work/img/sys" "$work/img/tmp"
cp /bin/busybox "$work/img/bin/busybox"
for l in sh true; do
        ln -s busybox "$work/img/bin/$l"
done
tar -C "$work/img" -cf "$work/img.tar" .
"${pm[@]}" import "$work/img.tar" hutch-bench-oci:1 >/dev/null 2>&1
img=localhost/hutch-bench-oci:1

names=(hutch-oci runc crun)
paths=("$oci" "$(command -v runc || echo /usr/sbin/runc)" "$(command -v crun || echo /usr/bin/crun)")
run_one() {
        "${pm[@]}" --runtime "$1" run --rm --network none --ulimit nofile=1024:1024 \
                --ulimit nproc=1024:1024 "$img" true
}

declare -A ok samples
for i in "${!names[@]}"; do
        if [ ! -x "${paths[$i]}" ]; then
                ok[${names[$i]}]=0
                echo "${names[$i]} is not installed" >&2
                continue
        fi
        if err=$(run_one "${paths[$i]}" 2>&1 >/dev/null); then
                ok[${names[$i]}]=1
        else
                ok[${names[$i]}]=0
                echo "${names[$i]} refuses to run here: ${err##*$'\n'}" >&2
        fi
done

now_ms() {
        date +%s%N | awk '{ printf "%.3f", $1 / 1e6 }'
}
for ((r = 0; r < rounds; r++)); do
        for i in "${!names[@]}"; do
                n=${names[$i]}
                [ "${ok[$n]}" = 1 ] || continue
                for ((k = 0; k < runs; k++)); do
                        t0=$(now_ms)
                        run_one "${paths[$i]}" >/dev/null
                        t1=$(now_ms)
                        samples[$n]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') "
                done
        done
done

median() {
        tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END {
                if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "podman run --rm IMG true, $rounds rounds of $runs runs, medians:"
echo
echo "| runtime | median ms | vs runc |"
echo "|---|---|---|"
runc_med=""
if [ "${ok[runc]}" = 1 ]; then
        runc_med=$(echo "${samples[runc]}" | median)
fi
for n in "${names[@]}"; do
        if [ "${ok[$n]}" != 1 ]; then
                echo "| $n | not run: refused on this host or not installed | - |"
                continue
        fi
        m=$(echo "${samples[$n]}" | median)
        ratio="-"
        if [ -n "$runc_med" ]; then
                ratio=$(awk -v a="$m" -v b="$runc_med" 'BEGIN { printf "%.2fx", a / b }')
        fi
        echo "| $n | $m | $ratio |"
done
