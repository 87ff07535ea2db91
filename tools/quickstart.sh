#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tools/quickstart.sh: installs what the build needs, builds hutch in
# build/, and runs one command in a sandbox with the default policy.
set -euo pipefail

cd "$(dirname "$0")/.."

tools/deps.sh build

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build

hutch=build/hutch
if [ ! -x "$hutch" ]; then
        hutch=build/src/cli/hutch
fi

# Single quotes on purpose: $(hostname) is expanded inside the sandbox.
# shellcheck disable=SC2016
exec "$hutch" run -- sh -c 'echo "hello from $(hostname)"; id; ls /; cat /proc/self/uid_map'
