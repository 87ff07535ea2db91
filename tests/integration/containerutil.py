# SPDX-License-Identifier: LGPL-2.1-or-later
"""Container engines for test_in_container.py, started by the tests with
their own state directories (nothing of a system daemon is used or
touched):

 - Dockerd: Debian's /usr/sbin/dockerd (and the containerd it starts)
   with its own --data-root, --exec-root and unix socket, no iptables, no
   bridge; driven with /usr/bin/docker -H unix://SOCK.
 - Podman: /usr/bin/podman with its own --root, --runroot and --tmpdir,
   cgroupfs, file events; daemonless.

Images are made offline: a tar of a few directories, the merged-/usr
symlinks and a small /etc (with a /etc/shadow that must stay hidden),
imported with `docker import` / `podman import`. The host's /usr is bound
read-only into each container (so /bin/sh, python3 and the libraries are
the host's), and hutch and the probe come from a staged directory bound
at /h.

In a container, driver.py (IN_CONTAINER_DRIVER) runs a list of commands and
prints one JSON object with each one's exit status, output and the
outcome file hutch wrote, so that one `run` covers a whole case."""

import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

DOCKERD = "/usr/sbin/dockerd" if os.path.exists("/usr/sbin/dockerd") else "/usr/bin/dockerd"
DOCKER = "/usr/bin/docker"
PODMAN = "/usr/bin/podman"
RUNC = shutil.which("runc", path="/usr/sbin:/usr/bin:/sbin:/bin") or "/usr/sbin/runc"
IMAGE = "hutch-test-rootfs:1"
SHADOW_SECRET = "HUTCH-SHADOW-SECRET"
MARKER = "/hutch-container-marker"
POLL_S = 0.05

IN_CONTAINER_DRIVER = r'''
import json, os, subprocess, sys

cases = json.loads(sys.argv[1])
res = {}
for name, argv in cases:
    out = f"/tmp/outcome-{name}.json"
    argv = [a.replace("@OUTCOME@", out) for a in argv]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, so, se = -1, "", "timeout"
    outcome = None
    if os.path.exists(out):
        with open(out) as f:
            try:
                outcome = json.load(f)
            except ValueError:
                outcome = None
    res[name] = {"rc": rc, "out": so, "err": se, "outcome": outcome}
print(json.dumps(res))
'''


def rootfs_tar():
    """The image: directories, the merged-/usr links (the host's /usr is
    bound over /usr), /etc with passwd, group and a secret shadow, and a
    marker file at the root that no sandbox may see."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        def add_dir(name, mode=0o755):
            ti = tarfile.TarInfo(name)
            ti.type = tarfile.DIRTYPE
            ti.mode = mode
            t.addfile(ti)

        def add_file(name, data, mode=0o644):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = mode
            t.addfile(ti, io.BytesIO(data))

        for d in ("usr", "etc", "proc", "sys", "dev", "root", "run", "mnt", "home", "var", "h"):
            add_dir(d)
        add_dir("tmp", 0o1777)
        for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"),
                             ("lib64", "usr/lib64")):
            ti = tarfile.TarInfo(link)
            ti.type = tarfile.SYMTYPE
            ti.linkname = target
            t.addfile(ti)
        add_file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
                 b"agent:x:1000:1000:agent:/tmp:/bin/sh\n")
        add_file("etc/group", b"root:x:0:\nagent:x:1000:\n")
        add_file("etc/shadow", f"root:{SHADOW_SECRET}:19000:0:99999:7:::\n".encode(), 0o640)
        add_file(MARKER.lstrip("/"), b"container root\n")
        # test_filesystem.py's precondition: the caller's $HOME has files.
        add_file("root/.profile", b"# hutch test image\n")
    return buf.getvalue()


def stage(dest, hutch, probe):
    """hutch, the probe and the driver in @dest (world-readable), bound
    at /h in the containers."""
    os.chmod(dest, 0o755)
    shutil.copy2(hutch, dest / "hutch")
    shutil.copy2(probe, dest / "probe")
    (dest / "driver.py").write_text(IN_CONTAINER_DRIVER)
    for f in ("hutch", "probe"):
        os.chmod(dest / f, 0o755)
    os.chmod(dest / "driver.py", 0o644)


def mounts_below(path):
    """Mount points at or below @path, deepest first (from mountinfo;
    lines without the fields we use are skipped)."""
    found = []
    prefix = str(path).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 5:
                continue
            mp = fields[4].encode().decode("unicode_escape")
            if mp == str(path) or mp.startswith(prefix):
                found.append(mp)
    return sorted(set(found), key=len, reverse=True)


def remove_tree(path):
    for mp in mounts_below(path):
        subprocess.run(["umount", "-l", mp], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for(pred, timeout):
    """Polls @pred until it is true or @timeout seconds pass; its last
    answer."""
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def wait_gone(pid, timeout):
    """Waits on @pid's pidfd (it is not our child when it is containerd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        import select
        r, _, _ = select.select([fd], [], [], timeout)
        return bool(r)
    finally:
        os.close(fd)


class Dockerd:
    """A private dockerd. Call close() (the fixture does) to stop it and
    the containerd it started, by pid, and remove its directories."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="hutch-dockerd-"))
        self.sock = self.dir / "docker.sock"
        self.log = open(self.dir / "dockerd.log", "wb")
        self.proc = subprocess.Popen(
            [DOCKERD, "--data-root", str(self.dir / "data"), "--exec-root",
             str(self.dir / "exec"), "-H", f"unix://{self.sock}", "--iptables=false",
             "--ip6tables=false", "--bridge=none", "--pidfile", str(self.dir / "dockerd.pid"),
             "--containerd-namespace", f"hutch-test-{os.getpid()}",
             "--containerd-plugins-namespace", f"hutch-test-p-{os.getpid()}"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self.error = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self.sock.exists() and self.cli("version", timeout=10).returncode == 0:
                return
            time.sleep(POLL_S)
        self.error = "dockerd did not start: " + self.log_tail()

    def log_tail(self):
        try:
            return (self.dir / "dockerd.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def cli(self, *args, input=None, timeout=120):
        return subprocess.run([DOCKER, "-H", f"unix://{self.sock}", *args], input=input,
                              capture_output=True, timeout=timeout)

    def import_image(self):
        r = self.cli("import", "-", IMAGE, input=rootfs_tar())
        assert r.returncode == 0, r.stderr
        return IMAGE

    def containerd_pid(self):
        p = self.dir / "exec" / "containerd" / "containerd.pid"
        try:
            return int(p.read_text().strip())
        except (OSError, ValueError):
            return None

    def close(self):
        ctd = self.containerd_pid()
        if self.proc.poll() is None:
            r = self.cli("ps", "-aq", timeout=30)
            ids = r.stdout.decode().split() if r.returncode == 0 else []
            if ids:
                self.cli("rm", "-f", *ids, timeout=60)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if ctd and pid_alive(ctd) and not wait_gone(ctd, 10):
            os.kill(ctd, signal.SIGKILL)
            wait_gone(ctd, 10)
        self.log.close()
        remove_tree(self.dir)


class Podman:
    """podman with private storage; close() removes its containers and
    directories."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="hutch-podman-"))
        self.base = [PODMAN, "--root", str(self.dir / "root"), "--runroot",
                     str(self.dir / "runroot"), "--tmpdir", str(self.dir / "tmp"),
                     "--cgroup-manager", "cgroupfs", "--events-backend", "file",
                     # runc, not crun (podman's choice when both are
                     # installed): crun refuses this host's hybrid cgroups.
                     "--runtime", RUNC,
                     "--storage-driver", "overlay"]
        self.error = None
        r = self.cli("info", timeout=60)
        if r.returncode != 0:
            self.error = "podman info failed: " + r.stderr.decode(errors="replace")[-2000:]

    def cli(self, *args, input=None, timeout=120):
        return subprocess.run([*self.base, *args], input=input, capture_output=True,
                              timeout=timeout)

    def import_image(self):
        r = self.cli("import", "-", IMAGE, input=rootfs_tar())
        assert r.returncode == 0, r.stderr
        return "localhost/" + IMAGE

    def close(self):
        self.cli("rm", "-af", timeout=60)
        remove_tree(self.dir)


def run_case(engine, image, bindir, flags, cases, user=None, extra_run=()):
    """Runs @cases ([name, argv] with "@OUTCOME@" for an outcome file) in
    one container of @image started with @flags (as @user); returns
    {name: {rc, out, err, outcome}} and the raw CompletedProcess."""
    argv = ["run", "--rm", "--network", "none", *extra_run, "-v", "/usr:/usr:ro",
            "-v", f"{bindir}:/h:ro", *flags]
    if user:
        argv += ["--user", user]
    argv += [image, "/usr/bin/python3", "/h/driver.py", json.dumps(cases)]
    r = engine.cli(*argv, timeout=180)
    out = r.stdout.decode(errors="replace")
    try:
        return json.loads(out.strip().splitlines()[-1]), r
    except (ValueError, IndexError):
        raise AssertionError(
            f"the container failed (exit {r.returncode}): {r.stderr.decode(errors='replace')}"
            f"\n{out}") from None
