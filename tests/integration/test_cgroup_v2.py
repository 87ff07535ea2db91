# SPDX-License-Identifier: LGPL-2.1-or-later
"""The cgroup v2 code path, end to end, on a real pure-v2 kernel.

This machine (and CI's) has a hybrid layout whose v2 hierarchy offers no
memory, pids or cpu controller, and they cannot be moved there while v1
uses them. Most users run pure cgroup v2, so the v2 path is exercised in a
throwaway kernel: user-mode Linux (Debian's user-mode-linux) boots with the
host's / as its root (hostfs), mounts only cgroup2 at /sys/fs/cgroup, and
runs the real hutch binary there, as root and as an unprivileged user with
a delegated subtree (the way systemd delegates one). Each case prints one
line that this test reads back.
"""

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from conftest import BUILD, IS_ROOT, TEST_USER, find_hutch

UML = shutil.which("linux.uml")
BOOT_TIMEOUT = 180

# Each case: name, shell command run inside the UML guest (as root unless
# it drops privileges itself). $H is hutch, $J a fresh outcome file.
CASES = {
    "true": '$H run --json $J -- true',
    "oom": "$H run --memory 32m --json $J -- python3 -c 'a = bytearray(200 << 20)'",
    "oom_twin": "$H run --memory 512m --json $J -- python3 -c 'a = bytearray(200 << 20)'",
    "pids": "$H run --pids 16 --json $J -- sh -c 'for i in $(seq 40); do sleep 2 & done; wait'",
    "pids_twin": "$H run --pids 64 --json $J -- sh -c 'for i in $(seq 10); do sleep 0.1 & done; wait'",
    "timeout": "$H run --timeout 1s --json $J -- sh -c "
    "'setsid sh -c \"exec -a hutch-v2-marker sleep 30\" & sleep 30'",
    "cpu": "$H run --cpus 0.5 --json $J -- sh -c 'timeout 2 sh -c \"while :; do :; done\"'",
    # Waits (bounded) for the run's cgroup: under load the guest is slow.
    "cpu_max": "$H run --cpus 0.5 -- sh -c 'sleep 3' & "
    "for i in $(seq 100); do cat /sys/fs/cgroup/hutch/run-*/cpu.max 2>/dev/null && break; "
    "sleep 0.05; done; wait",
    "leftover": "ls /sys/fs/cgroup/hutch | grep -c '^run-' || true",
    "marker": "grep -l 'hutch-v2-marke[r]' /proc/[0-9]*/cmdline 2>/dev/null | wc -l",
    # The unprivileged user in a delegated subtree: hutch creates its
    # cgroups next to the user's own scope, inside deleg.slice.
    "user_oom": "$U $H run --memory 32m --json $J -- python3 -c 'a = bytearray(200 << 20)'",
    "user_pids": "$U $H run --pids 16 --json $J -- "
    "sh -c 'for i in $(seq 40); do sleep 2 & done; wait'",
    "user_leftover": "ls /sys/fs/cgroup/deleg.slice | grep -c '^run-' || true",
    # A container as Docker and Podman make one on v2: its own cgroup
    # (processes in it, no controller enabled below it) seen through a
    # private cgroup namespace, where it is "/" (issue 25).
    "ctr_procs": "$C sh -c 'cat /sys/fs/cgroup/cgroup.procs | wc -l' 2>&1",
    "ctr_oom": "$C $H run --memory 32m --json $J -- python3 -c 'a = bytearray(200 << 20)'",
    "ctr_twin": "$C $H run --memory 512m --json $J -- python3 -c 'a = bytearray(200 << 20)'",
    "ctr_err": "$C sh -c \"$H run --memory 32m -- true 2>&1\"",
    "ctr_left": "ls /sys/fs/cgroup/ctr/hutch | grep -c '^run-' || true",
    # hutch-oci on pure v2 (issue 21): the config's device rules as an eBPF
    # device program, the only devices wall here; the twin has no rules.
    "oci_dev": "$W/oci-run.sh dev1 $W/oci-rules",
    "oci_dev_twin": "$W/oci-run.sh dev2 $W/oci-norules",
}

# A busybox container that makes two device nodes and reads /dev/zero;
# CAP_MKNOD is granted, so only the device rules stand in the way.
OCI_SCRIPT = (
    "{ busybox mknod /tmp/kmsg c 1 11 && echo kmsg-made; "
    "busybox mknod /tmp/mem c 1 1 && echo mem-made || echo mem-refused; "
    "busybox head -c1 /dev/zero > /dev/null && echo zero-read; } > /tmp/out 2>&1; touch /tmp/done"
)

# Runs a bundle to its end in the guest and prints what it wrote.
OCI_RUN = textwrap.dedent(
    """\
    #!/bin/sh
    O={oci}; ST={work}/oci-state
    $O --root $ST create --bundle $2 $1 < /dev/null > /dev/null 2> {work}/$1.err || cat {work}/$1.err
    $O --root $ST start $1
    for i in $(seq 300); do [ -e $2/rootfs/tmp/done ] && break; sleep 0.1; done
    cat $2/rootfs/tmp/out
    $O --root $ST delete --force $1
    """
)


def oci_bundle(path, devices):
    """A busybox bundle at @path (made on the host, seen through hostfs)."""
    import engines
    root = path / "rootfs"
    for d in ("bin", "proc", "dev", "tmp"):
        (root / d).mkdir(parents=True)
    shutil.copy2(engines.BUSYBOX, root / "bin" / "busybox")
    os.symlink("busybox", root / "bin" / "sh")
    config = {
        "ociVersion": "1.0.2",
        "process": {"args": ["sh", "-c", OCI_SCRIPT], "env": ["PATH=/bin"], "cwd": "/",
                    "user": {"uid": 0, "gid": 0},
                    "capabilities": {k: ["CAP_MKNOD"] for k in ("bounding", "effective", "permitted")}},
        "root": {"path": "rootfs"},
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                    "options": ["nosuid", "mode=755"]}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "ipc"},
                                 {"type": "uts"}],
                  "cgroupsPath": f"/oci-test/{path.name}"},
    }
    if devices is not None:
        config["linux"]["resources"] = {"devices": devices}
    (path / "config.json").write_text(json.dumps(config))

INIT = textwrap.dedent(
    """\
    #!/bin/sh
    # PID 1 of the user-mode Linux guest: a pure cgroup v2 machine.
    PATH=/usr/sbin:/usr/bin:/sbin:/bin
    export PATH
    mount -t proc proc /proc
    mount -t sysfs sys /sys
    mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
    mount -t cgroup2 cgroup2 /sys/fs/cgroup
    echo "+memory +pids +cpu" > /sys/fs/cgroup/cgroup.subtree_control
    echo "CONTROLLERS $(cat /sys/fs/cgroup/cgroup.controllers)"
    # Delegation as systemd does it: a slice the user owns, with the
    # user's session scope inside it.
    mkdir -p /sys/fs/cgroup/deleg.slice/session.scope
    echo "+memory +pids +cpu" > /sys/fs/cgroup/deleg.slice/cgroup.subtree_control
    chown -R {uid}:{gid} /sys/fs/cgroup/deleg.slice
    H={hutch}
    W={work}
    U=$W/as-user.sh
    C=$W/in-container.sh
    # The container: its cgroup, and a private cgroup and mount namespace
    # made once (by the process that stays its init) with cgroup2 mounted
    # again, as an engine makes them; in-container.sh enters them as
    # `docker exec` does.
    mkdir -p /sys/fs/cgroup/ctr
    sh -c 'echo $$ > /sys/fs/cgroup/ctr/cgroup.procs && exec unshare --cgroup --mount \
        --propagation private sh -c "umount /sys/fs/cgroup && \
        mount -t cgroup2 cgroup2 /sys/fs/cgroup && touch $0 && exec sleep 1000" '$W/ctr.up &
    echo $! > $W/ctr.pid
    for i in $(seq 100); do [ -e $W/ctr.up ] && break; sleep 0.1; done
    . {cases}
    echo o > /proc/sysrq-trigger
    sleep 30
    """
)


def case_lines():
    out = []
    for name, cmd in CASES.items():
        out.append(f'J=$W/{name}.json; rm -f $J; touch $J; chmod 666 $J')
        out.append(f"OUT=$( {cmd} 2>/dev/null ); RC=$?")
        out.append(
            f'echo "CASE {name} rc=$RC json=$(cat $J 2>/dev/null) out=$(echo $OUT | tr \'\\n\' \' \')"'
        )
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def guest():
    if not IS_ROOT:
        pytest.skip("booting user-mode Linux with the host's / needs root")
    if not UML:
        pytest.skip("user-mode Linux is not installed (apt-get install user-mode-linux)")
    hutch = find_hutch()
    if not hutch:
        pytest.skip(f"no hutch binary under {BUILD}")
    pw = subprocess.run(["id", "-u", TEST_USER], capture_output=True, text=True)
    if pw.returncode != 0:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", TEST_USER], check=True)
    uid = int(subprocess.run(["id", "-u", TEST_USER], capture_output=True, text=True).stdout)
    gid = int(subprocess.run(["id", "-g", TEST_USER], capture_output=True, text=True).stdout)

    # A world-readable copy of hutch, so the unprivileged user can run it
    # whatever the permissions of the checkout.
    work = Path(tempfile.mkdtemp(prefix="hutch-uml-"))
    try:
        os.chmod(work, 0o755)
        shutil.copy2(hutch, work / "hutch")
        os.chmod(work / "hutch", 0o755)
        (work / "cases.sh").write_text(case_lines())
        # Moves itself into the user's scope, then becomes the user.
        (work / "as-user.sh").write_text(
            "#!/bin/sh\n"
            "echo $$ > /sys/fs/cgroup/deleg.slice/session.scope/cgroup.procs || exit 99\n"
            f'exec setpriv --reuid={uid} --regid={gid} --clear-groups "$@"\n'
        )
        os.chmod(work / "as-user.sh", 0o755)
        # Joins the container's cgroup (its child "init" once hutch moved
        # the container's processes there), then its namespaces.
        (work / "in-container.sh").write_text(
            "#!/bin/sh\n"
            "echo $$ > /sys/fs/cgroup/ctr/cgroup.procs 2>/dev/null || "
            "echo $$ > /sys/fs/cgroup/ctr/init/cgroup.procs || exit 99\n"
            f'exec nsenter --target "$(cat {work}/ctr.pid)" --cgroup --mount "$@"\n'
        )
        os.chmod(work / "in-container.sh", 0o755)
        oci = BUILD / "src" / "oci" / "hutch-oci"
        (work / "oci-run.sh").write_text(OCI_RUN.replace("{oci}", str(oci))
                                         .replace("{work}", str(work)))
        os.chmod(work / "oci-run.sh", 0o755)
        oci_bundle(work / "oci-rules", [
            {"allow": False, "access": "rwm"},
            {"allow": True, "type": "c", "major": 1, "minor": 11, "access": "rwm"}])
        oci_bundle(work / "oci-norules", None)
        init = work / "init.sh"
        init.write_text(
            INIT.replace("{uid}", str(uid))
            .replace("{gid}", str(gid))
            .replace("{hutch}", str(work / "hutch"))
            .replace("{cases}", str(work / "cases.sh"))
            .replace("{work}", str(work))
        )
        os.chmod(init, 0o755)
        r = subprocess.run(
            [
                UML,
                "mem=1024M",
                "root=/dev/root",
                "rootfstype=hostfs",
                "rootflags=/",
                "rw",
                f"init={init}",
                "con=null",
                "con0=null,fd:1",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=BOOT_TIMEOUT,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cases, controllers = {}, ""
    for line in r.stdout.splitlines():
        if line.startswith("CONTROLLERS "):
            controllers = line.split(" ", 1)[1]
        if not line.startswith("CASE "):
            continue
        name, rest = line[5:].split(" ", 1)
        rc, rest = rest.split(" json=", 1)
        js, out = rest.split(" out=", 1)
        cases[name] = {
            "rc": int(rc.split("=", 1)[1]),
            "outcome": json.loads(js) if js.strip() else None,
            "out": out.strip(),
        }
    assert cases, f"the guest printed no case (exit {r.returncode}):\n{r.stdout[-4000:]}"
    return {"cases": cases, "controllers": controllers, "log": r.stdout[-4000:]}


def case(guest, name):
    c = guest["cases"].get(name)
    assert c is not None, f"case {name} did not run:\n{guest['log']}"
    return c


def test_guest_is_pure_v2(guest):
    for ctrl in ("memory", "pids", "cpu"):
        assert ctrl in guest["controllers"].split(), guest["controllers"]


def test_plain_run(guest):
    c = case(guest, "true")
    assert c["rc"] == 0
    assert c["outcome"]["reason"] == "exited"
    assert c["outcome"]["degraded"] == []


def test_memory_limit_is_oom_on_v2(guest):
    c = case(guest, "oom")
    assert c["rc"] == 137, c
    o = c["outcome"]
    assert o["reason"] == "oom"
    assert 0.5 * (32 << 20) <= o["mem_peak_bytes"] <= 1.1 * (32 << 20), o
    twin = case(guest, "oom_twin")
    assert twin["rc"] == 0 and twin["outcome"]["reason"] == "exited", twin


def test_pids_limit_on_v2(guest):
    c = case(guest, "pids")
    assert c["outcome"]["reason"] == "pids", c
    twin = case(guest, "pids_twin")
    assert twin["rc"] == 0 and twin["outcome"]["reason"] == "exited", twin


def test_timeout_kills_daemon_on_v2(guest):
    c = case(guest, "timeout")
    assert c["rc"] == 137 and c["outcome"]["reason"] == "timeout", c
    assert c["outcome"]["wall_ms"] < 1500, c
    assert case(guest, "marker")["out"] == "0"


def test_cpu_quota_on_v2(guest):
    o = case(guest, "cpu")["outcome"]
    assert 0.35 <= o["cpu_ms"] / o["wall_ms"] <= 0.65, o
    assert case(guest, "cpu_max")["out"].split() == ["50000", "100000"]


def test_no_cgroup_left_on_v2(guest):
    assert case(guest, "leftover")["out"] == "0"
    assert case(guest, "user_leftover")["out"] == "0"


def test_delegated_user_limits_on_v2(guest):
    c = case(guest, "user_oom")
    assert c["rc"] == 137 and c["outcome"]["reason"] == "oom", c
    assert c["outcome"]["degraded"] == []
    c = case(guest, "user_pids")
    assert c["outcome"]["reason"] == "pids", c



def test_memory_limit_in_a_container_with_its_own_cgroup_namespace(guest):
    """A container's cgroup, seen as "/" through a private cgroup
    namespace, holds the container's processes: hutch moves them into its
    child "init" so that the memory controller can be enabled below it
    (v2 refuses that with processes in the cgroup, EBUSY, which hutch
    reported before), and the limit holds: OOM at 32 MiB, not at 512."""
    # The container's init and this case's shell, cat and wc: the
    # container's cgroup holds processes, which is what v2 objects to.
    assert int(case(guest, "ctr_procs")["out"]) >= 2, case(guest, "ctr_procs")
    c = case(guest, "ctr_oom")
    assert c["rc"] == 137 and c["outcome"]["reason"] == "oom", c
    twin = case(guest, "ctr_twin")
    assert twin["rc"] == 0 and twin["outcome"]["reason"] == "exited", twin
    err = case(guest, "ctr_err")
    assert err["rc"] == 0 and err["out"] == "", err
    assert case(guest, "ctr_left")["out"] == "0", case(guest, "ctr_left")



def test_oci_device_rules_hold_on_pure_v2(guest):
    """hutch-oci's eBPF device program, the only devices wall on a pure v2
    host: the rule's device can be made, another cannot, the default
    devices work; without rules both can be made."""
    out = case(guest, "oci_dev")["out"].split()
    assert "kmsg-made" in out and "mem-refused" in out and "zero-read" in out, out
    twin = case(guest, "oci_dev_twin")["out"].split()
    assert "kmsg-made" in twin and "mem-made" in twin and "zero-read" in twin, twin
