# SPDX-License-Identifier: LGPL-2.1-or-later
"""Image leftovers of issue 17 (docs/images-run.md):
  - a one-shot `hutch run --image` holds an in-use mark while it runs:
    `hutch image rm` of its image is refused during the run and allowed
    after it (the twin), and a mark left by a killed run is stale;
  - an exec in a persistent sandbox runs as the image's User (as root,
    whose sandboxes hold a range of ids), the twin an image without one."""

import subprocess
import time

from test_image_run import images, out, root_images  # noqa: F401 (fixtures)


def wait_line(p, want):
    line = p.stdout.readline()
    assert line == want, (line, p.poll(), p.stderr.read() if p.poll() is not None else "")


def test_image_rm_is_refused_while_a_run_uses_it(images):
    p = images.store.popen("run", "--image", "bb", "--", "sh", "-c", "echo ready; read x",
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        wait_line(p, "ready\n")
        r = images.hutch("image", "rm", "bb")
        assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
        assert "used by run" in r.stderr, r.stderr
        assert out(images.hutch("image", "inspect", "bb"))
        p.stdin.write("go\n")
        p.stdin.close()
        assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        p.kill()
        p.wait()
    # The twin: the run over, its mark is gone and rm works.
    r = images.hutch("image", "rm", "bb")
    assert r.returncode == 0, r.stderr
    assert images.hutch("image", "inspect", "bb").returncode != 0


def test_a_killed_runs_mark_is_stale(images):
    p = images.store.popen("run", "--image", "bb", "--", "sh", "-c", "echo ready; read x",
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        wait_line(p, "ready\n")
        assert images.hutch("image", "rm", "bb").returncode == 125
        # SIGKILL: the run cannot remove its mark.
        p.kill()
        p.wait()
        marks = list((images.store.home / "images" / "refs").glob("*/run:*"))
        assert marks, "the killed run left no mark to test"
        # Wait for the sandbox's own processes to go (the event: no
        # process of that pid; the supervisor was the holder).
        deadline = time.monotonic() + 30
        while images.hutch("image", "rm", "bb").returncode != 0:
            assert time.monotonic() < deadline, "a dead run's mark still holds the image"
            time.sleep(0.05)
    finally:
        p.kill()
        p.wait()
    assert images.hutch("image", "inspect", "bb").returncode != 0


# ---- exec in a persistent sandbox runs as the image's User ----


def test_exec_runs_as_the_images_user(root_images):
    st = root_images.store
    st.create("appbox", "--image", "app")
    r = st.exec("appbox", "sh", "-c", "id -u; id -g; echo $HOME $USER")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1000", "1000", "/home/app", "app"]
    # What it writes is the image user's.
    r = st.exec("appbox", "sh", "-c", "touch /tmp/mine && stat -c %u /tmp/mine")
    assert r.returncode == 0 and r.stdout.strip() == "1000", (r.stdout, r.stderr)
    # Twin: an image without User execs as the sandbox's root.
    st.create("bbbox", "--image", "bb")
    r = st.exec("bbbox", "sh", "-c", "id -u")
    assert r.returncode == 0 and r.stdout.strip() == "0", (r.stdout, r.stderr)
