#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-image-import.sh: the first use of a 100 MB image (issue 17,
# docs/images.md): `hutch image import ARCHIVE` (verify and unpack every
# layer) side by side with `podman load -i ARCHIVE` plus `podman run --rm
# IMG true`, each from an empty store every round, medians. The archive is
# an OCI archive of the tests' busybox image (tests/integration/imageutil.py)
# plus a layer of 100 files of 1 MiB of random bytes (gzip cannot shrink
# them), built offline. Podman runs with its own --root/--runroot, cgroupfs
# and runc. `hutch run --image` rows are bench/bench-image.sh's.
# Usage: bench/bench-image-import.sh [ROUNDS]
set -euo pipefail

cd "$(dirname "$0")/.."

rounds=${1:-5}

tools/deps.sh bench

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build >/dev/null
hutch=$PWD/build/src/cli/hutch

work=$(mktemp -d /tmp/hutch-bench-image.XXXXXX)
pm=(podman --root "$work/root" --runroot "$work/run" --tmpdir "$work/tmp"
        --cgroup-manager cgroupfs --events-backend file
        --runtime "$(command -v runc || echo /usr/sbin/runc)")
cleanup() {
        "${pm[@]}" rm -af >/dev/null 2>&1 || true
        "${pm[@]}" system reset -f >/dev/null 2>&1 || true
        rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

/usr/bin/python3 - "$work/image.tar" "$work" <<'PYEOF'
import os
import sys
sys.path.insert(0, "tests/integration")
import imageutil as iu

big = iu.TarBuilder()
big.dir("data")
for i in range(100):
    big.file(f"data/blob-{i:03d}", os.urandom(1 << 20))
image = iu.make_image(layers=[iu.layer0(), big.bytes()], compression=("gzip", "gzip"),
                      config={"Env": ["PATH=/bin"], "Cmd": ["/bin/true"]})
iu.write_oci_archive(sys.argv[1], sys.argv[2], image, ref="hutch-bench-image:1")
PYEOF
size=$(du -m "$work/image.tar" | cut -f1)

now_ms() {
        date +%s%3N
}

hutch_once() {
        rm -rf "${work:?}/home"
        mkdir -m 0700 "$work/home"
        HUTCH_HOME=$work/home "$hutch" image import -q "$work/image.tar" >/dev/null
}

podman_once() {
        "${pm[@]}" rmi -af >/dev/null 2>&1 || true
        "${pm[@]}" load -q -i "$work/image.tar" >/dev/null
        # By id: how podman names an OCI archive's image varies by version.
        "${pm[@]}" run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
                "$("${pm[@]}" images -q | head -n 1)" true
}

# Each must work before it is timed.
hutch_once
podman_once

declare -a h p
for ((r = 0; r < rounds; r++)); do
        sync
        t0=$(now_ms)
        hutch_once
        t1=$(now_ms)
        h+=($((t1 - t0)))
        sync
        t0=$(now_ms)
        podman_once
        t1=$(now_ms)
        p+=($((t1 - t0)))
done

median() {
        printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

echo "first use of a ${size} MB image (OCI archive, gzip layers), median of $rounds rounds:"
echo
echo "| command | median ms |"
echo "|---|---|"
echo "| hutch image import (verify + unpack) | $(median "${h[@]}") |"
echo "| podman load + podman run --rm IMG true | $(median "${p[@]}") |"
