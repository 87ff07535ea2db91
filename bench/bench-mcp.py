#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The exec round trip through `hutch mcp` against `hutch exec` (issue 7):
N sequential `true` commands in one persistent sandbox, each way, rounds
interleaved, p50/p99 per path.

- mcp: one `hutch mcp` server kept running; a sample is one tools/call
  exec request written to its stdin until its response line is read (the
  JSON-RPC framing, the server's output capture and the keeper round trip).
- exec: a sample is one `hutch exec NAME -- true` process, from spawn to
  exit (the process start, the store lookup and the same keeper round trip).

Both run the command in the same sandbox, which is started once before
the first sample (so no sample pays for a sandbox start). The client is
Python; it adds the same small cost to both paths.

    bench/bench-mcp.py [BUILD_DIR] [CALLS]      (default: build, 1000)
"""

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "build").resolve()
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
ROUNDS = 5
NAME = "bench-mcp"


def percentile(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))]


class Server:
    def __init__(self, hutch, env, cwd):
        self.p = subprocess.Popen([hutch, "mcp", "--name", NAME], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, cwd=cwd)
        self.id = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "0"}})
        self.notify("notifications/initialized")

    def notify(self, method):
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.p.stdin.flush()

    def call(self, method, params):
        self.id += 1
        msg = {"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        resp = json.loads(self.p.stdout.readline())
        if "error" in resp:
            raise RuntimeError(resp["error"])
        return resp["result"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def mcp_samples(server, n):
    params = {"name": "exec", "arguments": {"command": "true"}}
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        res = server.call("tools/call", params)
        out.append(time.perf_counter() - t0)
        if res.get("isError") or res["structuredContent"]["exit_code"] != 0:
            raise RuntimeError(f"exec through mcp failed: {res}")
    return out


def exec_samples(hutch, env, cwd, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run([hutch, "exec", NAME, "--", "true"], env=env, cwd=cwd,
                           stdin=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"hutch exec exited {r.returncode}")
    return out


def main():
    hutch = str(BUILD / "hutch")
    if not os.access(hutch, os.X_OK):
        hutch = str(BUILD / "src" / "cli" / "hutch")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    ws = tmp / "ws"
    ws.mkdir()
    env = dict(os.environ, HUTCH_HOME=str(tmp / "home"), HUTCH_STATE_DIR=str(tmp / "state"))
    (tmp / "state").mkdir(mode=0o700)
    server = None
    try:
        server = Server(hutch, env, str(ws))
        # Creates and starts the sandbox; warms both paths up.
        mcp_samples(server, 20)
        exec_samples(hutch, env, str(ws), 20)
        per_round = max(1, CALLS // ROUNDS)
        mcp, ex = [], []
        for r in range(ROUNDS):
            order = [("mcp", lambda: mcp.extend(mcp_samples(server, per_round))),
                     ("exec", lambda: ex.extend(exec_samples(hutch, env, str(ws), per_round)))]
            for _, run in order if r % 2 == 0 else reversed(order):
                run()
        print(f"kernel {os.uname().release}, {os.cpu_count()} cpus, uid {os.getuid()}, "
              f"{len(mcp)} calls per path ({ROUNDS} interleaved rounds)")
        print(f"{'path':<12}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'min ms':>10}")
        for name, samples in (("mcp exec", mcp), ("hutch exec", ex)):
            ms = [s * 1000 for s in samples]
            print(f"{name:<12}{percentile(ms, 50):>10.2f}{percentile(ms, 99):>10.2f}"
                  f"{statistics.mean(ms):>10.2f}{min(ms):>10.2f}")
    finally:
        if server:
            server.close()
        subprocess.run([hutch, "rm", "--force", NAME], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
