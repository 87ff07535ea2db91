#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-image-pull.sh: `hutch image pull` (issue 17, docs/images-pull.md)
# against `skopeo copy`, from Debian's docker-registry on 127.0.0.1 (plain
# HTTP, filesystem storage in a temporary folder). The image is made
# offline: busybox plus LAYERS layers of LAYER_MIB MiB of random data each
# (gzip, so the bytes on the wire are about the bytes on disk). Prints one
# table of medians over RUNS runs, the commands interleaved (each run does
# all of them, in a rotating order):
#   - hutch image pull --layout DIR   (download and verify into an OCI layout)
#   - skopeo copy docker://REF oci:DIR (the same, by skopeo)
#   - hutch image pull                (download, verify and import: unpacked
#                                      layers in a fresh image store)
# Every run starts from an empty destination. See bench/README.md. Nothing
# fails when a number is worse than a target.
#
# Usage: bench/bench-image-pull.sh [BUILD_DIR]
# Environment: RUNS (7), LAYERS (3), LAYER_MIB (32), TMPDIR.
set -euo pipefail

cd "$(dirname "$0")/.."

BUILD=${1:-${HUTCH_BUILD_DIR:-build}}
RUNS=${RUNS:-7}
LAYERS=${LAYERS:-3}
LAYER_MIB=${LAYER_MIB:-32}
if [[ ! -f $BUILD/build.ninja ]]; then
        meson setup "$BUILD" >/dev/null
fi
ninja -C "$BUILD" >/dev/null
HUTCH=$(realpath "$BUILD")/src/cli/hutch
for tool in docker-registry skopeo python3; do
        if ! command -v "$tool" >/dev/null; then
                echo "bench-image-pull: needs $tool (tools/deps.sh test)" >&2
                exit 1
        fi
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-image-pull.XXXXXX")
REGISTRY_PID=

cleanup() {
        trap - EXIT INT TERM
        if [[ -n $REGISTRY_PID ]]; then
                kill "$REGISTRY_PID" 2>/dev/null || true
                wait "$REGISTRY_PID" 2>/dev/null || true
        fi
        rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/registry.yml" <<EOF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $WORK/storage
http:
  addr: 127.0.0.1:$PORT
EOF
docker-registry serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
for _ in $(seq 200); do
        if python3 -c "import http.client as h; c = h.HTTPConnection('127.0.0.1', $PORT, timeout=1); c.request('GET', '/v2/'); exit(c.getresponse().status != 200)" 2>/dev/null; then
                break
        fi
        sleep 0.05
done

# The image, as an OCI layout, pushed with skopeo.
PYTHONPATH=tests/integration python3 - "$WORK/src" "$LAYERS" "$LAYER_MIB" <<'EOF'
import gzip, io, json, os, sys, tarfile
import registryutil

root, layers, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lay = registryutil.Layout(root)
_, base = lay.image()
man = json.loads((lay.root / "blobs" / "sha256" / base["digest"][7:]).read_bytes())
cfg = json.loads((lay.root / "blobs" / "sha256" / man["config"]["digest"][7:]).read_bytes())
for i in range(layers):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = os.urandom(mib << 20)
        ti = tarfile.TarInfo(f"data{i}")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    tar = buf.getvalue()
    gz = gzip.compress(tar, compresslevel=1, mtime=0)
    man["layers"].append({"mediaType": registryutil.MT_LAYER_GZIP, **lay.blob(gz)})
    cfg["rootfs"]["diff_ids"].append(registryutil.sha256(tar))
man["config"] = {"mediaType": registryutil.MT_CONFIG, **lay.blob(json.dumps(cfg).encode())}
body = json.dumps(man).encode()
lay.tag({"mediaType": registryutil.MT_MANIFEST, **lay.blob(body)}, "bench")
EOF
skopeo --insecure-policy copy --quiet --dest-tls-verify=false "oci:$WORK/src:bench" \
        "docker://127.0.0.1:$PORT/bench:1"
REF=127.0.0.1:$PORT/bench:1
SIZE_MIB=$(du -sm "$WORK/storage" | cut -f1)

now_ns() {
        date +%s%N
}

# run NAME: one timed run of a command into a fresh destination; appends
# the milliseconds to $WORK/NAME.ms.
run() {
        local name=$1 start end
        rm -rf "${WORK:?}/dest" "${WORK:?}/home"
        start=$(now_ns)
        case $name in
        hutch-layout) "$HUTCH" image pull -q --tls-verify=false --layout "$WORK/dest" "$REF" >/dev/null 2>&1 ;;
        skopeo) skopeo --insecure-policy copy --quiet --src-tls-verify=false "docker://$REF" "oci:$WORK/dest:1" >/dev/null ;;
        hutch-store) HUTCH_HOME=$WORK/home "$HUTCH" image pull -q --tls-verify=false "$REF" >/dev/null 2>&1 ;;
        esac
        end=$(now_ns)
        echo $(((end - start) / 1000000)) >>"$WORK/$name.ms"
}

names=(hutch-layout skopeo hutch-store)
for ((i = 0; i < RUNS; i++)); do
        for ((j = 0; j < ${#names[@]}; j++)); do
                run "${names[$(((i + j) % ${#names[@]}))]}"
        done
done

median() {
        sort -n "$1" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

echo "image: busybox + $LAYERS x $LAYER_MIB MiB random layers (${SIZE_MIB} MiB in the registry), $RUNS runs each, interleaved"
echo
echo "| command | median ms |"
echo "|---|---|"
echo "| \`hutch image pull --layout DIR\` | $(median "$WORK/hutch-layout.ms") |"
echo "| \`skopeo copy docker://REF oci:DIR\` | $(median "$WORK/skopeo.ms") |"
echo "| \`hutch image pull\` (download + import into the store) | $(median "$WORK/hutch-store.ms") |"
