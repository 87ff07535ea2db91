#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Start-up cost of a sandbox with one secret (CA generation and the CA
# round trip included) against the same allowlist without a secret, and
# against no network at all. Target (issue 5): secret within 5 ms of allow.
#
#   bench/bench-secrets.sh [RUNS]        # default 100; HUTCH=path/to/hutch
set -eu
runs=${1:-100}
hutch=${HUTCH:-build/src/cli/hutch}
export BENCH_TOKEN=sk-proj-benchmarkvalue0123456789abcdefXYZ
exec hyperfine -N -w 10 -r "$runs" \
        -n none "$hutch run -- /bin/true" \
        -n allow "$hutch run --allow-host api.example.com -- /bin/true" \
        -n secret "$hutch run --secret BENCH_TOKEN@api.example.com -- /bin/true"
