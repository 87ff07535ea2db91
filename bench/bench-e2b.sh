#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-e2b.sh: E2B's SDK against a local `hutch serve --e2b`
# (docs/e2b.md): the whole round trip Sandbox.create() +
# commands.run("true") + kill(), and commands.run("true") in a running
# sandbox, p50/p90, with the rows that split the latter (the SDK's Connect
# round trip, a Start without the shell, the login shell timed inside the
# sandbox: bench/bench-e2b.mjs). Needs node and the `e2b` package
# where the integration tests install it (~/.cache/hutch-tests/node, see
# tests/integration/test_e2b_control.py) or in $HUTCH_TEST_NODE_MODULES.
# Usage: bench/bench-e2b.sh [ROUNDS] [RUNS]    # default 20 rounds, 200 runs
# HUTCH_BUILD_DIR=DIR takes hutch from another build (an A/B against main's:
# run the two alternately with small counts on a loaded machine).
set -euo pipefail

cd "$(dirname "$0")/.."

rounds=${1:-20}
runs=${2:-200}
modules=${HUTCH_TEST_NODE_MODULES:-${XDG_CACHE_HOME:-$HOME/.cache}/hutch-tests/node/node_modules}
sdk=$modules/e2b/dist/index.mjs
if [ ! -f "$sdk" ]; then
        echo "bench-e2b: no e2b SDK at $sdk (run tests/integration/test_e2b_control.py once)" >&2
        exit 1
fi

build=${HUTCH_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
        meson setup "$build"
fi
ninja -C "$build" >/dev/null
hutch=$(cd "$build" && pwd)/src/cli/hutch

work=$(mktemp -d)
export HUTCH_HOME=$work/home HUTCH_STATE_DIR=$work/state
mkdir -m 0700 "$HUTCH_HOME" "$HUTCH_STATE_DIR"
head -c 24 /dev/urandom | base64 >"$work/key"
chmod 600 "$work/key"
server=

cleanup() {
        if [ -n "$server" ]; then
                kill "$server" 2>/dev/null || true
                wait "$server" 2>/dev/null || true
        fi
        rm -rf "$work"
}
trap cleanup EXIT

# shellcheck disable=SC2086 # $E2B_BENCH_FLAGS: extra serve flags, split
"$hutch" serve --e2b --api-key-file "$work/key" --e2b-listen 127.0.0.1:0 ${E2B_BENCH_FLAGS:-} \
        --e2b-envd-listen 127.0.0.1:0 >"$work/out" 2>"$work/err" &
server=$!
for _ in $(seq 100); do
        [ "$(wc -l <"$work/out")" -ge 2 ] && break
        sleep 0.1
done
api=$(sed -n 's/^e2b api on //p' "$work/out")
envd=$(sed -n 's/^e2b envd on //p' "$work/out")
if [ -z "$api" ] || [ -z "$envd" ]; then
        echo "bench-e2b: the server did not start:" >&2
        cat "$work/err" >&2
        exit 1
fi

E2B_SDK=$sdk E2B_API_URL=$api E2B_SANDBOX_URL=$envd E2B_DOMAIN=e2b.localhost \
        E2B_API_KEY=$(cat "$work/key") node bench/bench-e2b.mjs "$rounds" "$runs"
