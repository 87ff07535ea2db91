#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-persist.sh: persistent sandboxes (issue 6). Prints one table:
#   - `hutch exec NAME -- true` on a running sandbox: p50, p99 and execs/s
#     over ROUNDS x RUNS sequential execs, interleaved in rounds with
#     `hutch run -- true`, bwrap, `docker exec` (when docker works here),
#     /bin/true (the measuring loop's own cost, subtracted as "net") and two
#     diagnostics: `hutch --version` (what starting the hutch binary costs)
#     and the keeper's round trip without a client process;
#   - the same exec with a pause before each one (SPACED_RUNS, GAP_MS), as
#     an agent that thinks between commands calls it;
#   - a cold exec (the sandbox stopped: the exec starts the keeper);
#   - `hutch snapshot` of a stopped and of a running sandbox with 10 MiB and
#     1 GiB of changes in its layer;
#   - `hutch create --from SNAP` and the first exec in the new sandbox;
#   - `hutch snapshot export` and `import` of 1 GiB (random and zeros).
# See bench/README.md. Nothing fails when a number is worse than a target.
#
# Usage: bench/bench-persist.sh [BUILD_DIR]
# Environment: ROUNDS (10), RUNS (100), SPACED_RUNS (100), GAP_MS (50),
# COLD_RUNS (20), SNAP_RUNS (5), FROM_RUNS (20), XFER_RUNS (3), TMPDIR
# (where the store goes; the 1 GiB rows need 6 GiB free there and are
# skipped otherwise).
set -euo pipefail

cd "$(dirname "$0")/.."

BUILD=${1:-${HUTCH_BUILD_DIR:-build}}
if [[ ! -f $BUILD/build.ninja ]]; then
        meson setup "$BUILD" >/dev/null
fi
ninja -C "$BUILD" >/dev/null
HUTCH=$(realpath "$BUILD")/src/cli/hutch
if [[ ! -x $HUTCH ]]; then
        echo "bench-persist: $HUTCH is not built" >&2
        exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-persist.XXXXXX")
export HUTCH WORK HUTCH_HOME=$WORK/home HUTCH_STATE_DIR=$WORK/state
export DOCKER_NAME=hutch-bench-persist-$$
docker_started=$WORK/docker-started

# Everything this script made goes at exit: the sandboxes (which stops
# their keepers), a keeper that survived that (found by its command line
# and by our store in its environment, so never anyone else's), the
# docker container, the temp folder with the store and the archives.
cleanup() {
        local rc=$? d pid
        trap - EXIT INT TERM
        if [[ -f $docker_started ]]; then
                docker rm -f "$DOCKER_NAME" >/dev/null 2>&1 || true
        fi
        for d in "$HUTCH_HOME"/sandboxes/*/; do
                [[ -d $d ]] || continue
                if ! "$HUTCH" rm --force "$(basename "$d")" >/dev/null 2>&1; then
                        echo "bench-persist: cannot remove sandbox $(basename "$d")" >&2
                fi
        done
        for d in /proc/[0-9]*; do
                pid=${d#/proc/}
                if tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -q '^hutch __keeper ' &&
                        tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -qxF "HUTCH_HOME=$HUTCH_HOME"; then
                        echo "bench-persist: stopping leftover keeper $pid" >&2
                        kill -TERM "$pid" 2>/dev/null || true
                        sleep 1
                        kill -KILL "$pid" 2>/dev/null || true
                fi
        done
        rm -rf "$WORK"
        exit "$rc"
}
trap cleanup EXIT

# In the background so that a signal reaches the trap at once (a
# foreground child would delay it until its end).
/usr/bin/python3 - <<'EOF' &
import fcntl
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

HUTCH = os.environ["HUTCH"]
WORK = os.environ["WORK"]
HOME = os.environ["HUTCH_HOME"]
STATE = os.environ["HUTCH_STATE_DIR"]
DOCKER_NAME = os.environ["DOCKER_NAME"]
ROUNDS = int(os.environ.get("ROUNDS", "10"))
RUNS = int(os.environ.get("RUNS", "100"))
SPACED_RUNS = int(os.environ.get("SPACED_RUNS", "100"))
GAP_MS = int(os.environ.get("GAP_MS", "50"))
COLD_RUNS = int(os.environ.get("COLD_RUNS", "20"))
SNAP_RUNS = int(os.environ.get("SNAP_RUNS", "5"))
FROM_RUNS = int(os.environ.get("FROM_RUNS", "20"))
XFER_RUNS = int(os.environ.get("XFER_RUNS", "3"))
WARMUP = 5
MIB, GIB = 1 << 20, 1 << 30
NEED_FREE = 6 * GIB

DEVNULL = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
ERRLOG = os.path.join(WORK, "stderr.log")
ERRFD = os.open(ERRLOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
FILE_ACTIONS = [
    (os.POSIX_SPAWN_DUP2, DEVNULL, 0),
    (os.POSIX_SPAWN_DUP2, DEVNULL, 1),
    (os.POSIX_SPAWN_DUP2, ERRFD, 2),
]
ENV = dict(os.environ)


def progress(msg):
    print(f"bench-persist: {msg}", file=sys.stderr, flush=True)


def die(what):
    with open(ERRLOG, errors="replace") as f:
        tail = f.read()[-2000:]
    sys.exit(f"bench-persist: {what}\n{tail}")


def timed(argv):
    """One posix_spawn + waitpid (stdin and stdout /dev/null) in ns. The
    loop's own cost is what /bin/true measures this way."""
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, ENV, file_actions=FILE_ACTIONS)
    _, status = os.waitpid(pid, 0)
    t = time.perf_counter_ns() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        die(f"'{' '.join(argv)}' failed (exit {code})")
    return t


EXEC_REQ = json.dumps(
    {"op": "exec", "argv": ["true"], "env": [], "cwd": None, "timeout_ms": 0, "detach": False}
).encode()


def keeper_round_trip(sock_path):
    """`true` through the keeper's control socket from this process: what
    `hutch exec` costs without starting a client process."""
    t0 = time.perf_counter_ns()
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(sock_path)
        socket.send_fds(s, [EXEC_REQ], [DEVNULL, DEVNULL, ERRFD])
        started = json.loads(s.recv(65536))
        outcome = json.loads(s.recv(65536))
    t = time.perf_counter_ns() - t0
    if started.get("op") != "started" or outcome.get("op") != "outcome" or outcome.get("exit_code") != 0:
        die(f"keeper round trip failed: {started} {outcome}")
    return t


def run(argv):
    """An untimed step; its output is returned."""
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=ENV)
    if p.returncode != 0:
        sys.exit(f"bench-persist: '{' '.join(argv)}' failed (exit {p.returncode})\n{p.stderr}")
    return p.stdout


def h(*args):
    return [HUTCH, *args]


def keeper_gone(name):
    """Waits until the keeper of sandbox name has released keeper.lock.
    `hutch stop` (and `rm --force`) answer before the old keeper exits, and
    an exec started in between fails with "another keeper runs sandbox
    already" (seen about once in 40 stop + exec here)."""
    lock = os.path.join(STATE, name, "keeper.lock")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(0.002)
        finally:
            os.close(fd)
    sys.exit(f"bench-persist: the keeper of '{name}' did not exit")


def stop(name):
    run(h("stop", name))
    keeper_gone(name)


def remove(name):
    run(h("rm", "--force", name))
    keeper_gone(name)


def write_data(name, size, source):
    """size bytes from source into the sandbox's layer (this starts it),
    then onto the disk, so that no writeback of it falls into a timing."""
    run(h("exec", name, "--", "sh", "-c", f"head -c {size} {source} > /root/data"))
    run(["sync", "-f", HOME])


def pct(xs, p):
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def size_str(n):
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB"


# A row: name, samples (ns), the loop row to subtract for "net" (or None),
# the total wall time of the samples' blocks for a rate (or None), a rate
# of its own (MB/s) and a note. Section titles are rows with a name only.
rows = []
notes = []


def row(name, xs, loop=None, block=None, mbs=None, note=""):
    r = {"name": name, "xs": xs, "loop": loop, "block": block, "mbs": mbs, "note": note}
    rows.append(r)
    return r


def section(title):
    rows.append({"name": title, "xs": None})


def skipped(name, why):
    rows.append({"name": name, "xs": [], "note": f"skipped: {why}"})


# ---- environment ----

load_start = loadavg()
st = os.statvfs(WORK)
free = st.f_bavail * st.f_frsize
fstype = subprocess.run(["findmnt", "-no", "FSTYPE", "-T", WORK], capture_output=True, text=True).stdout.strip()
big = free >= NEED_FREE
if not big:
    notes.append(f"only {free / GIB:.1f} GiB free in {WORK} (the 1 GiB rows need {NEED_FREE // GIB} GiB): skipped")

probe_a, probe_b = os.path.join(WORK, "reflink-a"), os.path.join(WORK, "reflink-b")
with open(probe_a, "wb") as f:
    f.write(b"x" * 65536)
reflink = subprocess.run(["cp", "--reflink=always", probe_a, probe_b], capture_output=True).returncode == 0
for p in (probe_a, probe_b):
    if os.path.exists(p):
        os.unlink(p)
copy_how = "reflink (FICLONE)" if reflink else "copy_file_range, no reflink"

# ---- 1. exec on a running sandbox, side by side ----

run(h("create", "warm"))
run(h("exec", "warm", "--", "true"))  # starts its keeper
warm_sock = os.path.join(STATE, "warm", "keeper.sock")
TRUE = "/bin/true (loop cost)"
peers = [
    (TRUE, ["/bin/true"]),
    ("hutch exec (running)", h("exec", "warm", "--", "true")),
    ("hutch run -- true", h("run", "--", "true")),
]
bwrap = shutil.which("bwrap")
bwrap_argv = [bwrap or "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--tmpfs", "/tmp",
              "--proc", "/proc", "--dev", "/dev", "--cap-drop", "ALL", "/bin/true"]
if not bwrap:
    notes.append("bwrap: not installed (tools/deps.sh bench), skipped")
elif subprocess.run(bwrap_argv, capture_output=True).returncode != 0:
    notes.append("bwrap: does not run here, skipped")
else:
    peers.append(("bwrap --unshare-all", bwrap_argv))

docker = shutil.which("docker")
docker_ok = False
if docker:
    try:
        docker_ok = subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        pass
if not docker_ok:
    notes.append("docker exec: skipped (" + ("'docker info' fails: no daemon here" if docker else "no docker") + ")")
else:
    images = run([docker, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"]).split()
    image = next((i for i in images if i.split(":")[0].split("/")[-1] in ("busybox", "alpine", "debian", "ubuntu")), None)
    if not image:
        notes.append("docker exec: skipped (no busybox, alpine, debian or ubuntu image here to run)")
    else:
        open(os.path.join(WORK, "docker-started"), "w").close()
        run([docker, "run", "-d", "--rm", "--name", DOCKER_NAME, image, "sleep", "infinity"])
        peers.append((f"docker exec ({image})", [docker, "exec", DOCKER_NAME, "true"]))

peers.append(("  diag: hutch --version", h("--version")))
cmds = [(name, lambda argv=argv: timed(argv)) for name, argv in peers]
cmds.append(("  diag: keeper round trip", lambda: keeper_round_trip(warm_sock)))

samples = {name: [] for name, _ in cmds}
block_ns = {name: 0 for name, _ in cmds}
for rnd in range(ROUNDS):
    progress(f"exec round {rnd + 1}/{ROUNDS}")
    order = cmds[rnd % len(cmds):] + cmds[:rnd % len(cmds)]
    for name, fn in order:
        for _ in range(WARMUP):
            fn()
        t0 = time.perf_counter_ns()
        for _ in range(RUNS):
            samples[name].append(fn())
        block_ns[name] += time.perf_counter_ns() - t0

section(f"exec, back to back ({ROUNDS} rounds x {RUNS}, interleaved)")
loop_row = row(TRUE, samples[TRUE], block=block_ns[TRUE])
by_name = {}
for name, _ in cmds[1:]:
    spawned = "round trip" not in name
    by_name[name] = row(name, samples[name], loop=loop_row if spawned else None, block=block_ns[name],
                        note="" if spawned else "Python client on the socket, no process")

# ---- 1b. the same with a pause before each exec ----

spaced_cmds = [
    (TRUE, cmds[0][1]),
    ("hutch exec (running)", cmds[1][1]),
    ("  diag: keeper round trip", lambda: keeper_round_trip(warm_sock)),
]
spaced = {name: [] for name, _ in spaced_cmds}
progress(f"spaced execs: {SPACED_RUNS} x {len(spaced_cmds)}, {GAP_MS} ms apart")
for i in range(SPACED_RUNS):
    for name, fn in spaced_cmds[i % 3:] + spaced_cmds[:i % 3]:
        time.sleep(GAP_MS / 1000)
        spaced[name].append(fn())
section(f"exec, {GAP_MS} ms pause before each ({SPACED_RUNS} each, interleaved)")
spaced_loop = row(TRUE, spaced[TRUE])
spaced_exec = row("hutch exec (running)", spaced["hutch exec (running)"], loop=spaced_loop)
spaced_rt = row("  diag: keeper round trip", spaced["  diag: keeper round trip"])

# ---- 2. cold exec ----

section("cold exec")
run(h("create", "cold"))
run(h("exec", "cold", "--", "true"))
cold = []
for i in range(COLD_RUNS):
    progress(f"cold exec {i + 1}/{COLD_RUNS}")
    stop("cold")
    cold.append(timed(h("exec", "cold", "--", "true")))
stop("cold")
row("exec, sandbox stopped", cold, loop=loop_row, note="starts the keeper and the sandbox")

# ---- 3. snapshots ----


def snap_stopped(size, label):
    xs = []
    for i in range(SNAP_RUNS):
        progress(f"snapshot stopped {label} {i + 1}/{SNAP_RUNS}")
        run(h("create", "ss"))
        write_data("ss", size, "/dev/urandom")
        stop("ss")
        xs.append(timed(h("snapshot", "ss", "ss-snap")))
        remove("ss")
        run(h("snapshot", "rm", "ss-snap"))
    row(f"stopped, {label}", xs, loop=loop_row, note="the layer is renamed")


def snap_running(size, label):
    xs = []
    run(h("create", "rs"))
    write_data("rs", size, "/dev/urandom")  # its keeper keeps running
    for i in range(SNAP_RUNS):
        progress(f"snapshot running {label} {i + 1}/{SNAP_RUNS}")
        xs.append(timed(h("snapshot", "rs", "rs-snap")))
        run(h("snapshot", "rm", "rs-snap"))
        run(["sync", "-f", HOME])
    remove("rs")
    row(f"running, {label}", xs, loop=loop_row, mbs=size / 1e6 / (statistics.median(xs) / 1e9),
        note=f"freeze + {copy_how}")


section("snapshot (one file of random data in the layer)")
snap_stopped(10 * MIB, "10 MiB")
if big:
    snap_stopped(GIB, "1 GiB")
else:
    skipped("stopped, 1 GiB", "disk space")
snap_running(10 * MIB, "10 MiB")
if big:
    snap_running(GIB, "1 GiB")
else:
    skipped("running, 1 GiB", "disk space")

# ---- 4. create --from and the first exec ----

section("create --from a snapshot (10 MiB)")
run(h("create", "base"))
write_data("base", 10 * MIB, "/dev/urandom")
stop("base")
run(h("snapshot", "base", "base-snap"))
create_ns, first_ns = [], []
for i in range(FROM_RUNS):
    progress(f"create --from {i + 1}/{FROM_RUNS}")
    create_ns.append(timed(h("create", "fork", "--from", "base-snap")))
    first_ns.append(timed(h("exec", "fork", "--", "true")))
    remove("fork")
row("create --from SNAP", create_ns, loop=loop_row)
row("first exec in it", first_ns, loop=loop_row, note="starts the keeper and the sandbox")

# ---- 5. export and import ----


def transfer(source, label):
    name = f"x-{label}"
    archive = os.path.join(WORK, f"{name}.tar.zst")
    run(h("create", name))
    write_data(name, GIB, source)
    stop(name)
    run(h("snapshot", name, f"{name}-snap"))
    exp, imp = [], []
    size = 0
    for i in range(XFER_RUNS):
        progress(f"export/import {label} {i + 1}/{XFER_RUNS}")
        if os.path.exists(archive):
            os.unlink(archive)
        exp.append(timed(h("snapshot", "export", f"{name}-snap", "-o", archive)))
        size = os.path.getsize(archive)
        run(["sync", "-f", HOME])
        imp.append(timed(h("snapshot", "import", archive, "--name", f"{name}-imp")))
        run(h("snapshot", "rm", f"{name}-imp"))
        run(["sync", "-f", HOME])
    os.unlink(archive)
    remove(name)
    run(h("snapshot", "rm", f"{name}-snap"))
    row(f"export, {label}", exp, loop=loop_row, mbs=GIB / 1e6 / (statistics.median(exp) / 1e9),
        note=f"archive {size_str(size)} ({size / GIB:.3f} of the data)")
    row(f"import, {label}", imp, loop=loop_row, mbs=GIB / 1e6 / (statistics.median(imp) / 1e9),
        note="checks every file's SHA-256")


section("snapshot export / import, 1 GiB (one file)")
for source, label in (("/dev/urandom", "urandom"), ("/dev/zero", "zeros")):
    if big:
        transfer(source, label)
    else:
        skipped(f"export, {label}", "disk space")
        skipped(f"import, {label}", "disk space")

# ---- the table ----


def ms(ns):
    return f"{ns / 1e6:.2f}"


load_end = loadavg()
u = os.uname()
print(f"kernel {u.release}, {os.cpu_count()} cpus; store on {fstype} ({free / GIB:.0f} GiB free); "
      f"snapshot copy: {copy_how}")
print(f"load average (1, 5, 15 min): {load_start} at the start, {load_end} at the end")
print("each sample: posix_spawn + waitpid from Python; 'net' subtracts the p50 of /bin/true measured the "
      "same way (rate: its mean per run)")
print()
hdr = (f"{'measurement':<32} {'n':>5} {'p50 ms':>9} {'net p50':>9} {'p99 ms':>8} {'net p99':>8} "
       f"{'rate':>10} {'net rate':>10}  note")
print(hdr)
for r in rows:
    if r["xs"] is None:
        print(f"-- {r['name']} " + "-" * max(0, len(hdr) - len(r["name"]) - 4))
        continue
    xs = r["xs"]
    if not xs:
        print(f"{r['name']:<32} {'-':>5} {'-':>9} {'-':>9} {'-':>8} {'-':>8} {'-':>10} {'-':>10}  {r['note']}")
        continue
    n, med = len(xs), statistics.median(xs)
    lp = statistics.median(r["loop"]["xs"]) if r["loop"] else None
    lmean = statistics.fmean(r["loop"]["xs"]) if r["loop"] else None
    p99 = pct(xs, 99) if n >= 100 else None
    net = ms(med - lp) if lp is not None else "-"
    net99 = ms(p99 - lp) if lp is not None and p99 is not None else "-"
    rate = nrate = "-"
    if r.get("block"):
        rate = f"{n / (r['block'] / 1e9):.0f}/s"
        if lmean is not None:
            nrate = f"{n / ((r['block'] - n * lmean) / 1e9):.0f}/s"
    elif r.get("mbs"):
        rate = f"{r['mbs']:.0f} MB/s"
    print(f"{r['name']:<32} {n:>5} {ms(med):>9} {net:>9} {ms(p99) if p99 else '-':>8} {net99:>8} "
          f"{rate:>10} {nrate:>10}  {r['note']}")
print()

e = by_name["hutch exec (running)"]
lp = statistics.median(loop_row["xs"])
lmean = statistics.fmean(loop_row["xs"])
e50 = statistics.median(e["xs"]) - lp
erate = len(e["xs"]) / ((e["block"] - len(e["xs"]) * lmean) / 1e9)
print(f"targets (issue 6), net: exec p50 < 2 ms: {'met' if e50 < 2e6 else 'missed'} ({e50 / 1e6:.2f} ms); "
      f">= 500 execs/s: {'met' if erate >= 500 else 'missed'} ({erate:.0f}/s)")
ver = statistics.median(by_name["  diag: hutch --version"]["xs"]) - lp
rt = statistics.median(by_name["  diag: keeper round trip"]["xs"])
print(f"exec p50 {ms(statistics.median(e['xs']))} ms ~ /bin/true {ms(lp)} + starting the hutch binary "
      f"{ms(ver)} + keeper round trip {ms(rt)} + the rest of the client {ms(e50 - ver - rt)}")
print(f"with a {GAP_MS} ms pause: exec p50 {ms(statistics.median(spaced_exec['xs']))} ms, keeper round trip "
      f"{ms(statistics.median(spaced_rt['xs']))} ms (back to back: {ms(rt)})")
for n in notes:
    print(f"note: {n}")
EOF
bench=$!
trap 'kill -TERM "$bench" 2>/dev/null; wait "$bench" 2>/dev/null; exit 130' INT TERM
wait "$bench"
