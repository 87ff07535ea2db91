#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-vm.sh: the microVM backend (--backend vm) side by side with
# the namespace backend. See bench/README.md and docs/vm.md.
#
#   launch to exit    `hutch run -- true`, whole process, median of RUNS
#                     (vm: from a template, and cold with HUTCH_VM_COLD=1)
#   first answer      launch to the guest agent's first answer (vm only)
#   port round trip   PING/PONG over the virtio-serial port (vm only)
#   exec round trip   one more command in a running sandbox: EXEC of true
#                     to its EXIT (vm), `hutch exec NAME -- true` (ns)
#   hutch exec        `hutch exec NAME -- true` on a running persistent
#                     sandbox, whole process (vm: `create --backend vm`)
#   idle RSS          QEMU's resident memory, 256 MiB guest (vm only)
#
# Usage: bench/bench-vm.sh [RUNS] [COLD_RUNS]. The accelerator is TCG
# unless HUTCH_BENCH_ACCEL=kvm (the machines here have a PVM /dev/kvm that
# cannot boot a stock kernel). Bounded: RUNS (default 10) and COLD_RUNS
# (default 3) runs of each, nothing else loops.
set -euo pipefail

cd "$(dirname "$0")/.."

runs=${1:-10}
cold_runs=${2:-3}
accel=${HUTCH_BENCH_ACCEL:-tcg}

tools/deps.sh bench

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build >/dev/null

hutch=$PWD/build/src/cli/hutch
export HUTCH_AGENT_PATH=$PWD/build/src/guest/hutch-agent

# Median wall time in ms of RUNS runs of "$@".
median_ms() {
        local n=$1 t0 t1
        shift
        for _ in $(seq 1 "$n"); do
                t0=$(date +%s%N)
                "$@" >/dev/null 2>&1
                t1=$(date +%s%N)
                echo $(((t1 - t0) / 1000))
        done | sort -n | awk '{a[NR] = $1} END {printf "%.1f", a[int((NR + 1) / 2)] / 1000}'
}

vm=(--backend vm --vm-accel "$accel")

# Each must work before it is timed; the first vm run builds the template.
"$hutch" run -- true
"$hutch" run "${vm[@]}" -- true

ns_run=$(median_ms "$runs" "$hutch" run -- true)
vm_run=$(median_ms "$runs" "$hutch" run "${vm[@]}" -- true)
vm_cold=$(HUTCH_VM_COLD=1 median_ms "$cold_runs" "$hutch" run "${vm[@]}" -- true)

box=bench-vm-$$
vbox=bench-vm-vm-$$
cleanup() {
        "$hutch" rm --force "$box" >/dev/null 2>&1 || true
        "$hutch" rm --force "$vbox" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$hutch" create "$box" >/dev/null
"$hutch" exec "$box" -- true
ns_exec=$(median_ms "$runs" "$hutch" exec "$box" -- true)
# A persistent VM sandbox: its keeper and VM started by the first exec.
"$hutch" create "$vbox" "${vm[@]}" >/dev/null
"$hutch" exec "$vbox" -- true
vm_exec=$(median_ms "$runs" "$hutch" exec "$vbox" -- true)

bench=$PWD/build/bench/hutch-vm-bench
# Its shape (256 MiB) has a template of its own: built here, not timed.
"$bench" --accel "$accel" -n 1 >/dev/null
tpl=$("$bench" --accel "$accel" -n "$runs")
cold=$("$bench" --accel "$accel" -n "$runs" --cold)
get() { awk -v k="$2" '$1 == k {print $2}' <<<"$1"; }

printf '%-22s %12s %16s %12s\n' "" "ns" "vm (template)" "vm (cold)"
printf '%-22s %12s %16s %12s\n' "launch to exit (ms)" "$ns_run" "$vm_run" "$vm_cold"
printf '%-22s %12s %16s %12s\n' "first answer (ms)" "-" "$(get "$tpl" start_ms)" "$(get "$cold" start_ms)"
printf '%-22s %12s %16s %12s\n' "port round trip (ms)" "-" "$(get "$tpl" ping_ms)" "$(get "$cold" ping_ms)"
printf '%-22s %12s %16s %12s\n' "exec round trip (ms)" "$ns_exec" "$(get "$tpl" exec_ms)" "$(get "$cold" exec_ms)"
printf '%-22s %12s %16s %12s\n' "hutch exec (ms)" "$ns_exec" "$vm_exec" "-"
printf '%-22s %12s %16s %12s\n' "idle RSS (KiB)" "-" "$(get "$tpl" rss_kib)" "$(get "$cold" rss_kib)"
echo "accelerator: $accel; $runs runs ($cold_runs cold) on $(nproc) CPUs"
