# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch ls` after a snapshot shows what the sandbox was created from and
its real disk usage; `hutch diff --stat` prints git's summary shape and
`--name-status` the per-file list (issue 22)."""

import json
import re

from test_snapshots import make_hutch


def ls_rows(h):
    """NAME -> (DISK in MiB, FROM) from `hutch ls`."""
    lines = h.ok("ls").splitlines()
    assert lines[0].split()[0] == "NAME" and lines[0].split()[-2:] == ["DISK", "FROM"]
    rows = {}
    for line in lines[1:]:
        f = line.split()
        rows[f[0]] = (float(f[-2].rstrip("M")), f[-1])
    return rows


def test_ls_after_a_snapshot_shows_origin_and_usage(request):
    h = make_hutch(request, "root")
    h.ok("create", "lsbox")
    h.sh("lsbox", "head -c 3000000 /dev/urandom > /root/big")
    h.ok("stop", "lsbox")
    before = ls_rows(h)["lsbox"]
    assert before[0] >= 2.8 and before[1] == "-", before
    h.ok("snapshot", "lsbox", "lssnap")
    # The snapshot became the layer lsbox continues from: it is neither
    # its origin nor does its size vanish from the sandbox's usage.
    after = ls_rows(h)["lsbox"]
    assert after[1] == "-", after
    assert after[0] >= 2.8, after
    e = {x["name"]: x for x in json.loads(h.ok("ls", "--json"))}["lsbox"]
    assert e["parent"] == "lssnap" and e["from"] is None
    assert e["usage_bytes"] >= 3000000 > e["disk_bytes"]
    # Its twin: a sandbox created from the snapshot shows it as FROM.
    h.ok("create", "lsfork", "--from", "lssnap")
    assert ls_rows(h)["lsfork"][1] == "lssnap"
    assert sorted(h.ok("ls", "-q").split()) == ["lsbox", "lsfork"]


def test_diff_stat_is_gits_shape(request):
    h = make_hutch(request, "root")
    ws = h.workspace()
    (ws / "keep.txt").write_text("a\nb\nc\n")
    (ws / "gone.txt").write_text("x\ny\n")
    h.chown(ws / "keep.txt")
    h.chown(ws / "gone.txt")
    h.ok("create", "dbox", "--workspace", ws)
    h.sh("dbox", "cd /workspace && printf 'a\\nB\\nc\\nd\\n' > keep.txt && rm gone.txt && "
         "echo new > new.txt && mkdir emptydir")
    stat = h.ok("diff", "dbox", "--stat").splitlines()
    assert stat == [
        " gone.txt | 2 --",
        " keep.txt | 3 ++-",
        " new.txt  | 1 +",
        " 3 files changed, 3 insertions(+), 3 deletions(-)",
    ], stat
    # Its twin: --name-status keeps the per-file list, directories too.
    assert h.ok("diff", "dbox", "--name-status").splitlines() == [
        "A emptydir/",
        "D gone.txt",
        "M keep.txt",
        "A new.txt",
        "4 changes: 2 added, 1 modified, 1 deleted",
    ]
    h.fails("diff", "dbox", "--stat", "--name-status", msg=r"usage: hutch diff")
    h.ok("create", "dclean", "--workspace", ws)
    assert h.ok("diff", "dclean", "--stat") == "no changes\n"
    assert re.fullmatch(r"no changes\n", h.ok("diff", "dclean", "--name-status"))
