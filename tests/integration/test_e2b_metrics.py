# SPDX-License-Identifier: LGPL-2.1-or-later
"""GET /sandboxes/{id}/metrics of `hutch serve --e2b` (docs/e2b.md
"Metrics") through the real `e2b` SDK's Sandbox.getMetrics()
(e2b-control.mjs): one sample of the sandbox's cgroup. Its limits
(cpuCount from --cpus, memTotal from --memory, diskTotal from --disk), the
memory and disk it uses growing with what runs and is written inside, a
busy loop's CPU against an idle sandbox (the negative twin), none for a
paused sandbox and the SDK's SandboxNotFoundError for an unknown one. As
root and as the unprivileged user (where no cgroup of its own serves the
numbers, memUsed is null and cpuUsedPct 0: the test says which)."""

import os
import time

from test_e2b_control import e2b, e2b_sdk, name_of  # noqa: F401 (fixtures)

MIB = 1 << 20


def metric(srv, sid):
    m = srv.sdk("metrics", {"id": sid})
    assert isinstance(m, list) and len(m) == 1, m
    return m[0]


def test_metrics(e2b):
    root = e2b.runner.mode == "root"
    # the limits need root here (a cgroup of its own, a file system image);
    # as the user none can be enforced, and none is asked
    srv = e2b.start(*(["--memory", "256m", "--cpus", "1", "--disk", "64m"] if root else []))
    sid = srv.sdk("create")["sandboxId"]
    idle = metric(srv, sid)
    assert idle["cpuCount"] == (1 if root else os.cpu_count())
    assert idle["memTotal"] == (256 if root else 2048) * MIB  # 2g: the policy's default
    assert idle["diskTotal"] == (64 * MIB if root else None)
    assert abs(time.time() - time.mktime(time.strptime(idle["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
               + time.timezone) < 300
    cgroup = idle["memUsed"] is not None
    if root:
        assert cgroup, "as root the sandbox's cgroup serves the numbers"
    # memory and disk grow with what the sandbox holds: 32 MiB in its tmpfs
    # /dev/shm (counted in its memory), 8 MiB written to its disk
    r = srv.hutch("exec", name_of(sid), "--", "sh", "-c",
                  "head -c 33554432 /dev/zero > /dev/shm/m && head -c 8388608 /dev/urandom > /home/user/d")
    assert r.returncode == 0, r.stderr
    full = metric(srv, sid)
    assert full["diskUsed"] >= idle["diskUsed"] + 8 * MIB - MIB, (idle, full)
    if cgroup:
        assert full["memUsed"] >= idle["memUsed"] + 16 * MIB, (idle, full)
        assert idle["cpuUsedPct"] == 0, idle  # nothing runs: the negative twin
        # a busy loop: some CPU in the window (how much depends on the load)
        r = srv.hutch("exec", "-d", name_of(sid), "--", "sh", "-c", "while :; do :; done")
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 60
        while metric(srv, sid)["cpuUsedPct"] <= 0:
            assert time.monotonic() < deadline, "no CPU seen for a busy loop"
    else:
        assert full["memUsed"] is None and full["cpuUsedPct"] == 0
    # paused: no sample; unknown: the SDK's error
    assert srv.sdk("pause", {"id": sid})["paused"] is True
    assert srv.sdk("metrics", {"id": sid}) == []
    e = srv.sdk("metricsError", {"id": "0" * 20})
    assert e["error"] == "SandboxNotFoundError", e
    srv.stop()
    assert srv.sandboxes() == {}
