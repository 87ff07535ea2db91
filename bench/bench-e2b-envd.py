#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""E2B envd (issue 20, docs/e2b-envd.md) with the real `e2b` SDK against a
local `hutch serve --e2b`, namespace backend:

- run: `commands.run("true")` in a running sandbox (the Connect stream,
  the keeper round trip, the command's start and end), p50/p99;
- whole: create (POST /sandboxes) + `commands.run("true")` + `kill()`.

The SDK is the one test_e2b_envd.py pins, from the tests' npm cache
(~/.cache/hutch-tests/node, or HUTCH_TEST_NODE_MODULES).

    bench/bench-e2b-envd.py [BUILD_DIR] [CALLS] [ROUNDS]   (default: build, 200, 20)
"""

import json
import os
import pathlib
import select
import shutil
import signal
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "build").resolve()
CALLS = sys.argv[2] if len(sys.argv) > 2 else "200"
ROUNDS = sys.argv[3] if len(sys.argv) > 3 else "20"
KEY = "e2b_bench_" + "0123456789abcdef" * 2


def percentile(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))]


def line(proc):
    buf = b""
    while not buf.endswith(b"\n"):
        if not select.select([proc.stdout], [], [], 30)[0]:
            raise SystemExit("hutch serve --e2b did not start")
        b = os.read(proc.stdout.fileno(), 1)
        if not b:
            raise SystemExit("hutch serve --e2b exited")
        buf += b
    return buf.decode().strip().split(" on ", 1)[1]


def main():
    modules = pathlib.Path(os.environ.get("HUTCH_TEST_NODE_MODULES") or
                           pathlib.Path.home() / ".cache/hutch-tests/node/node_modules")
    if not (modules / "e2b" / "dist" / "index.mjs").is_file():
        raise SystemExit(f"no e2b SDK in {modules}: run tests/integration/test_e2b_envd.py once")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-e2b-"))
    (tmp / "home").mkdir(mode=0o700)
    key = tmp / "key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    shutil.copy2(REPO / "bench" / "bench-e2b-envd.mjs", tmp / "b.mjs")
    (tmp / "node_modules").symlink_to(modules)
    env = dict(os.environ, HUTCH_HOME=str(tmp / "home"), HUTCH_STATE_DIR=str(tmp / "home"))
    srv = subprocess.Popen([str(BUILD / "src/cli/hutch"), "serve", "--e2b", "--api-key-file",
                            str(key), "--e2b-listen", "127.0.0.1:0", "--e2b-envd-listen",
                            "127.0.0.1:0"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        api, envd = line(srv), line(srv)
        r = subprocess.run(["node", str(tmp / "b.mjs"), CALLS, ROUNDS], cwd=str(tmp),
                           env=dict(env, E2B_API_URL=api, E2B_SANDBOX_URL=envd, E2B_API_KEY=KEY),
                           capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise SystemExit(r.stdout + r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'what':<40} {'n':>5} {'p50 ms':>8} {'p99 ms':>8}")
    for name, key_ in (("commands.run('true'), running sandbox", "run"),
                       ("create + run('true') + kill", "whole")):
        s = out[key_]
        print(f"{name:<40} {len(s):>5} {percentile(s, 50):>8.2f} {percentile(s, 99):>8.2f}")


if __name__ == "__main__":
    main()
