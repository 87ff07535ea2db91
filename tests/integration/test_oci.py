# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-oci, hutch as an OCI runtime (issue 21, docs/oci.md).

Real engines from Debian's packages drive the real binary: Podman with
`--runtime PATH/hutch-oci` (its own --root/--runroot, cgroupfs) and a
dockerd of the test's own started with the runtime registered in its
daemon.json. The image is Debian's static busybox, imported offline.
Containment is checked from inside with the probe bind-mounted at /probe;
each claim has a negative twin (Debian's runc under the same flags, or the
same flags without the limit). Without engines, hutch-oci is driven
directly on a bundle: the state JSON, the refusal of a field it does not
implement and the JSON log lines."""

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import containerutil as cu
import engines
from conftest import BUILD, IS_ROOT, find_probe

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="engines and hutch-oci create run as root")

OCI = BUILD / "src" / "oci" / "hutch-oci"
RUNC = shutil.which("runc") or "/usr/sbin/runc"
IMAGE = "hutch-oci-busybox:1"
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class _PodmanAsDocker:
    """engines.busybox_image() imports through .docker(); podman's import
    takes the same arguments."""

    def __init__(self, podman):
        self.podman = podman

    def docker(self, *args, input=None, **kw):
        r = self.podman.cli(*args, input=input)
        assert r.returncode == 0, r.stderr
        return r


@pytest.fixture(scope="module")
def podman():
    if not os.path.exists(cu.PODMAN):
        pytest.skip("podman is not installed")
    if not OCI.exists():
        pytest.skip(f"{OCI} is not built")
    p = cu.Podman()
    try:
        if p.error:
            pytest.skip(p.error)
        engines.busybox_image(_PodmanAsDocker(p), IMAGE)
        yield p
    finally:
        p.close()
        sweep_oci_state(str(p.dir))


def sweep_oci_state(bundle_prefix, root="/run/hutch-oci"):
    """Deletes what an engine left in hutch-oci's default state root for
    bundles under @bundle_prefix (a SIGKILLed conmon never calls delete)."""
    if not os.path.isdir(root):
        return
    for cid in os.listdir(root):
        try:
            st = json.loads(Path(root, cid, "state.json").read_text())
        except (OSError, ValueError):
            continue
        if st.get("bundle", "").startswith(bundle_prefix):
            subprocess.run([str(OCI), "--root", root, "delete", "--force", cid],
                           capture_output=True, timeout=60)


def prun(podman, *args, runtime=None, timeout=120):
    r = podman.cli("--runtime", str(runtime or OCI), "run", "--rm", *ULIMITS, *args,
                   timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def probe_mount():
    probe = find_probe()
    assert probe, "the probe is not built"
    return ["-v", f"{probe}:/probe:ro"]


def hutch_oci_processes():
    """Processes whose executable is hutch-oci (any state root)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.startswith(str(OCI)):
            found.append(int(pid))
    return found


# ---- Podman ----

def test_podman_run_rm_passes_output_and_exit_code(podman):
    rc, out, err = prun(podman, "--network", "none", "localhost/" + IMAGE, "sh", "-c",
                        "echo hello-from-hutch; exit 3")
    assert rc == 3, err
    assert out.strip() == "hello-from-hutch"
    rc, out, err = prun(podman, "--network", "none", "localhost/" + IMAGE, "true")
    assert rc == 0, err
    assert not hutch_oci_processes()


def test_podman_container_has_hutchs_seccomp_even_when_unconfined(podman):
    """`--security-opt seccomp=unconfined --cap-add SYS_ADMIN` removes
    Podman's profile: hutch's deny list still answers bpf with EPERM.
    Twin: runc under the same flags lets bpf reach the kernel (EINVAL)."""
    flags = ["--network", "none", "--security-opt", "seccomp=unconfined", "--cap-add",
             "SYS_ADMIN", *probe_mount(), "localhost/" + IMAGE, "sh", "-c",
             "/probe syscall bpf; /probe status-field Seccomp; /probe status-field NoNewPrivs"]
    rc, out, err = prun(podman, *flags)
    assert rc == 0, err
    assert out.split() == ["EPERM", "2", "1"]
    rc, out, err = prun(podman, *flags, runtime=RUNC)
    assert rc == 0, err
    assert out.split() == ["EINVAL", "0", "0"]


def test_podman_capabilities_are_exactly_the_granted_ones(podman):
    base = ["--network", "none", *probe_mount(), "localhost/" + IMAGE, "/probe",
            "status-field", "CapBnd"]
    rc, out, err = prun(podman, "--cap-drop", "ALL", *base)
    assert rc == 0, err
    assert int(out.strip(), 16) == 0
    rc, out, err = prun(podman, "--cap-drop", "ALL", "--cap-add", "CHOWN", *base)
    assert rc == 0, err
    assert int(out.strip(), 16) == 1  # CAP_CHOWN is bit 0


def test_podman_pids_limit_is_enforced(podman):
    rc, out, err = prun(podman, "--network", "none", "--pids-limit", "10", "localhost/" + IMAGE,
                        "sh", "-c", "for i in $(seq 1 40); do sleep 30 & done; echo forked")
    assert "can't fork" in err or "Resource temporarily unavailable" in err, (rc, out, err)
    # Twin: without the limit all 40 start.
    rc, out, err = prun(podman, "--network", "none", "localhost/" + IMAGE, "sh", "-c",
                        "for i in $(seq 1 40); do sleep 30 & done; echo forked; kill $(jobs -p)")
    assert rc == 0 and out.strip() == "forked", err
    assert "fork" not in err


def test_podman_memory_limit_is_in_the_containers_cgroup(podman, tmp_path, monkeypatch):
    """The limit sits on the memory cgroup that holds the container's
    process (read from the host while it runs); a memory hog is killed.
    Twin: without --memory the same hog finishes."""
    monkeypatch.chdir(tmp_path)  # conmon writes an "oom" file into its cwd
    r = podman.cli("--runtime", str(OCI), "run", "-d", *ULIMITS, "--network", "none",
                   "--memory", "48m", "localhost/" + IMAGE, "sleep", "60")
    assert r.returncode == 0, r.stderr
    cid = r.stdout.decode().strip()
    try:
        pid = int(podman.cli("inspect", "--format", "{{.State.Pid}}", cid).stdout.decode())
        with open(f"/proc/{pid}/cgroup") as f:
            mem = [ln.split(":", 2)[2].strip() for ln in f if ":memory:" in ln][0]
        limit = int(Path(f"/sys/fs/cgroup/memory{mem}/memory.limit_in_bytes").read_text())
        assert limit == 48 * 1024 * 1024
    finally:
        podman.cli("--runtime", str(OCI), "rm", "-f", cid)
    hog = ["sh", "-c", "dd if=/dev/zero of=/dev/shm/hog bs=1M count=200 2>/dev/null && echo done"]
    rc, out, err = prun(podman, "--network", "none", "--memory", "48m", "--memory-swap", "48m",
                        "--shm-size", "300m", "localhost/" + IMAGE, *hog)
    assert rc != 0 and "done" not in out, (rc, out, err)
    rc, out, err = prun(podman, "--network", "none", "--shm-size", "300m",
                        "localhost/" + IMAGE, *hog)
    assert rc == 0 and out.strip() == "done", err


def test_podman_network_none_has_only_loopback(podman):
    rc, out, err = prun(podman, "--network", "none", *probe_mount(), "localhost/" + IMAGE,
                        "/probe", "ifaces")
    assert rc == 0, err
    assert out.split("\n")[0:1] == ["lo up"] and len(out.split()) == 2, out
    # Twin: the host's network namespace has more than loopback.
    rc, out, err = prun(podman, "--network", "host", *probe_mount(), "localhost/" + IMAGE,
                        "/probe", "ifaces")
    assert rc == 0, err
    assert len(out.strip().splitlines()) > 1, out


def test_podman_masked_and_readonly_paths(podman):
    """/proc/timer_list (a masked path) reads empty and /proc/sys is
    read-only. Twin: the host's /proc/timer_list has content."""
    assert len(Path("/proc/timer_list").read_bytes()) > 0
    rc, out, err = prun(podman, "--network", "none", "localhost/" + IMAGE, "sh", "-c",
                        "cat /proc/timer_list 2>&1 | wc -c; echo 1 > /proc/sys/kernel/domainname "
                        "2>/dev/null && echo writable || echo readonly")
    assert rc == 0, err
    assert out.split() == ["0", "readonly"]


def test_podman_stop_and_kill(podman):
    r = podman.cli("--runtime", str(OCI), "run", "-d", *ULIMITS, "--network", "none",
                   "localhost/" + IMAGE, "sleep", "300")
    assert r.returncode == 0, r.stderr
    cid = r.stdout.decode().strip()
    pid = int(podman.cli("inspect", "--format", "{{.State.Pid}}", cid).stdout.decode())
    r = podman.cli("--runtime", str(OCI), "kill", "--signal", "KILL", cid)
    assert r.returncode == 0, r.stderr
    assert cu.wait_gone(pid, 30)
    r = podman.cli("--runtime", str(OCI), "wait", cid)
    assert r.stdout.decode().strip() == "137"
    r = podman.cli("--runtime", str(OCI), "rm", cid)
    assert r.returncode == 0, r.stderr
    assert not hutch_oci_processes()


def test_podman_exec_joins_the_container_under_the_same_walls(podman):
    """`podman exec` runs in the container's namespaces (its pid 1 is the
    container's command), under hutch's filter, with its exit code; a
    missing command is reported by name. Twin: the host's pid 1 is not
    `sleep`."""
    r = podman.cli("--runtime", str(OCI), "run", "-d", *ULIMITS, "--network", "none",
                   *probe_mount(), "localhost/" + IMAGE, "sleep", "300")
    assert r.returncode == 0, r.stderr
    cid = r.stdout.decode().strip()
    try:
        r = podman.cli("--runtime", str(OCI), "exec", cid, "sh", "-c",
                       "tr '\\0' ' ' </proc/1/cmdline; echo; /probe syscall bpf; exit 7")
        assert r.returncode == 7, r.stderr
        assert r.stdout.decode().split() == ["sleep", "300", "EPERM"]
        r = podman.cli("--runtime", str(OCI), "exec", cid, "no-such-command")
        assert r.returncode != 0 and b"no-such-command" in r.stderr
        assert not Path("/proc/1/cmdline").read_bytes().startswith(b"sleep")
    finally:
        podman.cli("--runtime", str(OCI), "rm", "-f", "-t", "0", cid)


def test_podman_it_gets_a_terminal_through_the_console_socket(podman):
    """`podman run -it`: the process's stdin is a pty of the container's
    own devpts, whose master went to conmon over the console socket.
    Twin: without -t, stdin is not a terminal."""
    argv = " ".join([*podman.base, "--runtime", str(OCI), "run", "--rm", "-i", "-t", *ULIMITS,
                     "--network", "none", "localhost/" + IMAGE, "sh", "-c", "'tty; exit 5'"])
    r = subprocess.run(["script", "-eqc", argv, "/dev/null"], capture_output=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 5, r.stdout + r.stderr
    assert b"/dev/pts/0" in r.stdout
    rc, out, err = prun(podman, "-i", "--network", "none", "localhost/" + IMAGE, "sh", "-c",
                        "tty; exit 5")
    assert rc == 5 and out.strip() == "not a tty", err


def test_killed_engine_leaves_nothing_of_hutch_running(podman):
    """hutch-oci is not a daemon: once `create` returns, only the
    container's own processes remain, and killing them (what an engine's
    cleanup does) leaves no hutch-oci process behind."""
    r = podman.cli("--runtime", str(OCI), "run", "-d", *ULIMITS, "--network", "none",
                   "localhost/" + IMAGE, "sleep", "300")
    assert r.returncode == 0, r.stderr
    cid = r.stdout.decode().strip()
    pid = int(podman.cli("inspect", "--format", "{{.State.Pid}}", cid).stdout.decode())
    conmon = int(podman.cli("inspect", "--format", "{{.State.ConmonPid}}", cid).stdout.decode())
    try:
        assert not hutch_oci_processes()
        os.kill(conmon, 9)
        assert cu.wait_gone(conmon, 30)
        os.kill(pid, 9)
        assert cu.wait_gone(pid, 30)
        assert not hutch_oci_processes()
    finally:
        podman.cli("--runtime", str(OCI), "rm", "-f", "-t", "0", cid)
    assert not hutch_oci_processes()


# ---- hutch-oci on a bundle, without an engine ----

@pytest.fixture
def bundle(tmp_path):
    if not OCI.exists():
        pytest.skip(f"{OCI} is not built")
    rootfs = tmp_path / "bundle" / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    for d in ("proc", "dev", "tmp"):
        (rootfs / d).mkdir()
    shutil.copy2(engines.BUSYBOX, rootfs / "bin" / "busybox")
    for link in ("sh", "sleep", "true"):
        os.symlink("busybox", rootfs / "bin" / link)
    config = {
        "ociVersion": "1.0.2",
        "process": {"args": ["sleep", "300"], "env": ["PATH=/bin"], "cwd": "/",
                    "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs"},
        "hostname": "oci-test",
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                    "options": ["nosuid", "mode=755"]}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "network"},
                                 {"type": "uts"}, {"type": "ipc"}],
                  "cgroupsPath": f"/hutch-oci-test/{tmp_path.name}"},
    }
    try:
        yield tmp_path, config
    finally:
        state = tmp_path / "state"
        for c in (state.iterdir() if state.exists() else ()):
            oci(tmp_path, "delete", "--force", c.name, check=False)
        for d in Path("/sys/fs/cgroup").glob("*/hutch-oci-test"):
            subprocess.run(["rmdir", str(d)], capture_output=True)


def oci(tmp_path, *args, check=True):
    """Runs hutch-oci; its stderr goes through a file, since a created
    container keeps the stdio it was given (as with runc)."""
    errf = tmp_path / "stderr"
    with open(errf, "w") as err:
        r = subprocess.run([str(OCI), "--root", str(tmp_path / "state"), "--log",
                            str(tmp_path / "log.json"), "--log-format", "json",
                            *map(str, args)],
                           stdout=subprocess.PIPE if args[0] != "create" else subprocess.DEVNULL,
                           stderr=err, text=True, timeout=60, stdin=subprocess.DEVNULL)
    r.stderr = errf.read_text()
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_state_follows_create_start_kill_delete(bundle):
    tmp_path, config = bundle
    b = tmp_path / "bundle"
    (b / "config.json").write_text(json.dumps(config))
    cid = "t1"
    oci(tmp_path, "create", "--bundle", b, "--pid-file", tmp_path / "pid", cid)
    try:
        st = json.loads(oci(tmp_path, "state", cid).stdout)
        # runtime-spec state schema: required keys and types.
        assert st["ociVersion"] and st["id"] == cid and st["status"] == "created"
        assert st["pid"] == int((tmp_path / "pid").read_text()) and st["pid"] > 0
        assert st["bundle"] == str(b) and RFC3339.match(st["created"])
        assert isinstance(st["annotations"], dict) and "rootfs" in st and "owner" in st
        listed = oci(tmp_path, "list", "--format", "json").stdout
        assert [c["id"] for c in json.loads(listed)] == [cid]
        oci(tmp_path, "start", cid)
        assert json.loads(oci(tmp_path, "state", cid).stdout)["status"] == "running"
        # `start` returns once the init is released, maybe before its exec.
        assert cu.wait_for(lambda: Path(f"/proc/{st['pid']}/cmdline").read_bytes().split(b"\0")[0]
                           == b"sleep", 30)
        r = oci(tmp_path, "delete", cid, check=False)
        assert r.returncode != 0  # running: needs --force
        assert json.loads(oci(tmp_path, "ps", "--format", "json", cid).stdout) == [st["pid"]]
        pids_max = Path(f"/sys/fs/cgroup/pids/hutch-oci-test/{tmp_path.name}/pids.max")
        assert pids_max.read_text().strip() == "max"
        res = tmp_path / "res.json"
        res.write_text(json.dumps({"pids": {"limit": 7}}))
        oci(tmp_path, "update", "--resources", res, cid)
        assert pids_max.read_text().strip() == "7"
        res.write_text(json.dumps({"blockIO": {"weight": 10}}))
        r = oci(tmp_path, "update", "--resources", res, cid, check=False)
        assert r.returncode != 0 and "blockIO" in r.stderr
        oci(tmp_path, "pause", cid)
        assert json.loads(oci(tmp_path, "state", cid).stdout)["status"] == "paused"
        oci(tmp_path, "resume", cid)
        oci(tmp_path, "kill", cid, "SIGKILL")
        assert cu.wait_gone(st["pid"], 30)
        # The process is our zombie only if we were its parent; it is not.
        assert json.loads(oci(tmp_path, "state", cid).stdout)["status"] == "stopped"
        oci(tmp_path, "delete", cid)
        assert oci(tmp_path, "state", cid, check=False).returncode != 0
        assert not list(Path("/sys/fs/cgroup/memory/hutch-oci-test").glob(tmp_path.name))
    finally:
        oci(tmp_path, "delete", "--force", cid, check=False)


@pytest.mark.parametrize("field,pointer", [
    ({"linux": {"intelRdt": {"closID": "x"}}}, "/linux/intelRdt"),
    ({"process": {"apparmorProfile": "x"}}, "/process/apparmorProfile"),
    ({"linux": {"resources": {"blockIO": {"weight": 10}}}}, "/linux/resources/blockIO"),
    ({"hooks": {"createContainer": [{"path": "bin/true"}]}}, "/hooks/createContainer"),
    ({"annotations": {"io.hutch.secret": "TOKEN@api.example.com"}}, "io.hutch.secret"),
    # A sysctl that is not namespaced would be the host's.
    ({"linux": {"sysctl": {"kernel.panic": "0"}}}, "kernel.panic"),
    ({"linux": {"sysctl": {"net.ipv4/../../kernel/panic": "0"}}}, "net.ipv4/../../kernel/panic"),
])
def test_unsupported_field_is_refused_by_name(bundle, field, pointer):
    tmp_path, config = bundle
    for key, val in field.items():
        merged = dict(config.get(key, {}))
        for k2, v2 in val.items():
            if isinstance(v2, dict) and isinstance(merged.get(k2), dict):
                merged[k2] = {**merged[k2], **v2}
            else:
                merged[k2] = v2
        config[key] = merged
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    r = oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "bad", check=False)
    assert r.returncode != 0
    assert pointer in r.stderr
    lines = [json.loads(ln) for ln in (tmp_path / "log.json").read_text().splitlines()]
    last = lines[-1]
    assert last["level"] == "error" and pointer in last["msg"] and RFC3339.match(last["time"])
    assert not (tmp_path / "state" / "bad").exists()
    # Twin: the same bundle without the field is created.
    r = oci(tmp_path, "state", "bad", check=False)
    assert r.returncode != 0


def test_features_reports_hutchs_containment(bundle):
    tmp_path, _ = bundle
    f = json.loads(oci(tmp_path, "features").stdout)
    assert f["ociVersionMin"] and f["ociVersionMax"]
    assert f["linux"]["seccomp"]["enabled"] is True
    assert "io.hutch.seccomp" in f["annotations"]
    assert "io.hutch.allow-host" in f["annotations"]


# ---- Docker ----

def test_docker_run_with_the_reference_flags(tmp_path):
    why = engines.docker_available()
    if why:
        pytest.skip(why)
    if not OCI.exists():
        pytest.skip(f"{OCI} is not built")
    cfg = {"runtimes": {"hutch": {"path": str(OCI)}}}
    # containerd's socket path must fit in 108 bytes: a short directory.
    short = Path(tempfile.mkdtemp(prefix="hoci-"))
    try:
        _docker_cases(short, tmp_path, cfg)
    finally:
        cu.remove_tree(short)


def _docker_cases(short, tmp_path, cfg):
    with engines.dockerd(short, config=cfg) as d:
        img = engines.busybox_image(d, "busybox-local")
        r = d.docker("run", "--runtime", "hutch", "--rm", "--memory", "512m", "--network",
                     "none", img, "true", check=False)
        assert r.returncode == 0, r.stderr + d.log_tail()
        (tmp_path / "vol").mkdir()
        (tmp_path / "vol" / "in").write_text("from-host\n")
        r = d.docker("run", "--runtime", "hutch", "--rm", "--network", "none", "--read-only",
                     "--cap-drop", "ALL", "--tmpfs", "/tmp", "-e", "GREETING=hi", "-v",
                     f"{tmp_path / 'vol'}:/vol", "-w", "/vol", img, "sh", "-c",
                     'echo $GREETING; cat in; pwd; touch /x 2>/dev/null && echo rw || echo ro; '
                     'touch /tmp/y && echo tmp-ok; exit 5', check=False)
        assert r.returncode == 5, r.stderr + d.log_tail()
        assert r.stdout.split() == ["hi", "from-host", "/vol", "ro", "tmp-ok"]
        cid = d.docker("run", "-d", "--runtime", "hutch", "--network", "none", img, "sleep",
                       "300").stdout.strip()
        d.containers.add(cid)
        r = d.docker("exec", cid, "sh", "-c", "cat /proc/1/cmdline; exit 4", check=False)
        assert r.returncode == 4 and r.stdout == "sleep\0" "300\0", r.stderr
        d.docker("rm", "-f", cid)


# ---- containerd ----

def test_containerd_ctr_run_with_runc_binary(tmp_path):
    """`ctr run --runc-binary hutch-oci` through the runc v2 shim, on the
    containerd a private dockerd started: the task's exit status, exec,
    kill and delete."""
    why = engines.docker_available()
    if why:
        pytest.skip(why)
    if not OCI.exists() or not shutil.which("ctr"):
        pytest.skip("hutch-oci or ctr is missing")
    short = Path(tempfile.mkdtemp(prefix="hoci-"))
    try:
        with engines.dockerd(short) as d:
            # A fully qualified name on a reserved domain, so that
            # containerd's reference is the image's own name.
            img = engines.busybox_image(d, "registry.example.com/busybox-local:latest")
            tar = subprocess.run([engines.DOCKER, "-H", f"unix://{d.sock}", "save", img],
                                 capture_output=True, timeout=120, check=True).stdout
            sock = d.exec_root / "containerd" / "containerd.sock"
            ns = d.ns + "-ctr"
            ctr = ["ctr", "-a", str(sock), "-n", ns]
            r = subprocess.run([*ctr, "images", "import", "-"], input=tar, capture_output=True,
                               timeout=120)
            assert r.returncode == 0, r.stderr
            ref = img
            run = [*ctr, "run", "--runc-binary", str(OCI), "--rm"]
            r = subprocess.run([*run, ref, "ctr-t1", "sh", "-c", "echo via-ctr; exit 6"],
                               capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
            assert r.returncode == 6, r.stderr
            assert r.stdout.strip() == b"via-ctr"
            r = subprocess.run([*ctr, "run", "-d", "--runc-binary", str(OCI), ref, "ctr-t2",
                                "sleep", "300"], capture_output=True, timeout=120,
                               stdin=subprocess.DEVNULL)
            assert r.returncode == 0, r.stderr
            try:
                r = subprocess.run([*ctr, "task", "exec", "--exec-id", "e1", "ctr-t2", "sh",
                                    "-c", "exit 3"], capture_output=True, timeout=60,
                                   stdin=subprocess.DEVNULL)
                assert r.returncode == 3, r.stderr
                r = subprocess.run([*ctr, "task", "kill", "-s", "SIGKILL", "ctr-t2"],
                                   capture_output=True, timeout=60)
                assert r.returncode == 0, r.stderr
                r = subprocess.run([*ctr, "task", "delete", "ctr-t2"], capture_output=True,
                                   timeout=60)
                if r.returncode != 0:  # the kill may not have landed yet
                    subprocess.run([*ctr, "task", "delete", "-f", "ctr-t2"], capture_output=True,
                                   timeout=60)
            finally:
                subprocess.run([*ctr, "task", "delete", "-f", "ctr-t2"], capture_output=True,
                               timeout=60)
                subprocess.run([*ctr, "containers", "delete", "ctr-t2"], capture_output=True,
                               timeout=60)
            assert not hutch_oci_processes()
    finally:
        cu.remove_tree(short)
