# SPDX-License-Identifier: LGPL-2.1-or-later
"""New sandboxes' disk images are copies of one empty template per size
(issue 20: mkfs.ext4 was ~35 ms of every create; docs/persistent.md "Disk
limit").

As root, the first create of a size runs mkfs.ext4 once into
disk-templates/ in the store; every create of that size copies it (its data
extents only, so the copy stays sparse). Each sandbox's image is still its
own file of its own size: what one sandbox writes is not in another's, the
limit is each image's, and a template lost or half made (a crash) is made
again. As a user no image is made, so no template either."""

from test_persistent import root_store  # noqa: F401 (fixture)
from test_persistent_disk import ENOSPC_TEXT, MIB, fill, image_of, user_store  # noqa: F401


def templates(store):
    d = store.home / "disk-templates"
    return sorted(p for p in d.iterdir() if p.name.endswith(".img")) if d.is_dir() else []


def test_new_images_are_copies_of_one_template_per_size(root_store):
    s = root_store
    s.create("a", "--disk", "32m")
    (t32,) = templates(s)
    assert f"-{32 * MIB}-" in t32.name, t32.name
    before = t32.stat()
    s.create("b", "--disk", "32m")
    s.create("c", "--disk", "64m")
    # b reused a's template (the same file, not made again); c's size got
    # one of its own.
    assert templates(s)[0] == t32
    after = t32.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert len(templates(s)) == 2
    assert any(f"-{64 * MIB}-" in t.name for t in templates(s))

    # Each image is a file of its own, of its own size, and sparse.
    inos = {t32.stat().st_ino}
    for name, size in (("a", 32 * MIB), ("b", 32 * MIB), ("c", 64 * MIB)):
        st = image_of(s, name).stat()
        assert st.st_size == size
        assert st.st_blocks * 512 < 8 * MIB, st.st_blocks
        assert st.st_ino not in inos
        inos.add(st.st_ino)

    # What a sandbox writes is in its image only.
    s.sh("a", "echo from-a > /root/mine; echo only-a > /root/only-a")
    s.sh("b", "echo from-b > /root/mine")
    assert s.sh("a", "cat /root/mine") == "from-a\n"
    assert s.sh("b", "cat /root/mine") == "from-b\n"
    r = s.exec("b", "cat", "/root/only-a")
    assert r.returncode != 0 and "No such file" in r.stderr, (r.returncode, r.stderr)
    r = s.exec("c", "cat", "/root/mine")
    assert r.returncode != 0 and "No such file" in r.stderr, (r.returncode, r.stderr)

    # The limit is each image's own: 40 MiB fit in c's 64m, not in a's 32m.
    s.sh("c", "dd if=/dev/zero of=/root/forty bs=1M count=40 status=none")
    r = s.exec("a", "dd", "if=/dev/zero", "of=/root/forty", "bs=1M", "count=40")
    assert r.returncode != 0 and ENOSPC_TEXT in r.stderr, (r.returncode, r.stderr)
    fill(s, "b", "/root/big")
    # The template itself stays empty and unchanged by all that.
    assert t32.stat().st_mtime_ns == before.st_mtime_ns


def test_a_lost_or_half_made_template_is_made_again(root_store):
    s = root_store
    s.create("a", "--disk", "32m")
    (t32,) = templates(s)
    t32.unlink()
    # What a create that crashed while making it would leave.
    half = s.home / "disk-templates" / f".tmp-{32 * MIB}"
    (half / "data").mkdir(parents=True)
    (half / "disk.img").write_bytes(b"\0" * 4096)
    s.create("b", "--disk", "32m")
    assert [t.name for t in templates(s)] == [t32.name]
    assert not half.exists()
    s.sh("b", "echo fine > /root/f")
    assert s.sh("b", "cat /root/f") == "fine\n"
    fill(s, "b", "/root/big")
    # The sandbox made before keeps its own image.
    r = s.exec("a", "cat", "/root/f")
    assert r.returncode != 0 and "No such file" in r.stderr, (r.returncode, r.stderr)


def test_a_user_store_makes_no_template(user_store):
    s = user_store
    s.create("u")
    assert s.sh("u", "echo ok") == "ok\n"
    assert not image_of(s, "u").exists()
    assert not (s.home / "disk-templates").exists()


def test_the_smallest_limit_has_a_template_too(root_store):
    s = root_store
    s.create("m", "--disk", "16m")
    (t,) = templates(s)
    assert t.stat().st_size == 16 * MIB
    assert image_of(s, "m").stat().st_size == 16 * MIB
    fill(s, "m", "/root/big")


def test_gc_removes_the_templates(root_store):
    s = root_store
    s.create("a", "--disk", "32m")
    s.create("b", "--disk", "64m")
    s.sh("a", "echo kept > /root/f")
    assert len(templates(s)) == 2
    r = s.hutch("gc")
    assert r.returncode == 0, r.stderr
    assert templates(s) == []
    # Nothing else of the store's went with them; the next create of a
    # size makes its template again.
    assert s.sh("a", "cat /root/f") == "kept\n"
    s.create("c", "--disk", "32m")
    assert len(templates(s)) == 1
    s.sh("c", "echo new > /root/f")
    assert s.sh("c", "cat /root/f") == "new\n"
    assert s.sh("a", "cat /root/f") == "kept\n"
