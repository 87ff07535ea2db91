# SPDX-License-Identifier: LGPL-2.1-or-later
"""A persistent sandbox's data/ folder as a test can look at it
(docs/persistent.md "Disk limit"): root's sandboxes keep it in a disk image
(`disk.img`) that only the keeper's mount namespace (or, for a moment, a
command looking at a stopped sandbox) has mounted.

`data_of(home, state, name)` is a context manager yielding a Path to it:
the store's folder when the sandbox has no image; the keeper's view
(/proc/PID/root/...) while it runs; else the image mounted read-write on
the store's data/ for the with-block only (`mount -o loop`, unmounted
after it), and nothing of hutch may run on that sandbox meanwhile."""

import socket
import struct
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path


def _attached(image):
    for d in Path("/sys/block").glob("loop*"):
        try:
            if (d / "loop" / "backing_file").read_text().strip() == str(image):
                return True
        except OSError:
            continue
    return False


def has_image(home, name):
    return (Path(home) / "sandboxes" / name / "disk.img").exists()


def keeper_pid(state, name):
    """The running keeper's pid (SO_PEERCRED of its socket), or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(str(Path(state) / name / "keeper.sock"))
        pid, _, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return pid
    except OSError:
        return None
    finally:
        s.close()


@contextmanager
def data_of(home, state, name):
    data = Path(home) / "sandboxes" / name / "data"
    if not has_image(home, name):
        yield data
        return
    pid = keeper_pid(state, name)
    if pid:
        yield Path(f"/proc/{pid}/root{data}")
        return
    subprocess.run(["mount", "-o", "loop,nosuid,nodev", str(data.parent / "disk.img"), str(data)],
                   check=True, capture_output=True)
    try:
        yield data
    finally:
        subprocess.run(["umount", str(data)], check=True, capture_output=True)
        # The loop device (autoclear) lets go of the image a moment later.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _attached(data.parent / "disk.img"):
            time.sleep(0.01)
