# SPDX-License-Identifier: LGPL-2.1-or-later
"""The image store and `hutch image` (issue 17, docs/images.md): each
format imports (OCI layout directory and tar, docker save archive, root
filesystem tar, stdin), its layers become overlay lower layers (whiteouts,
opaque directories, hard links, owners), layers are shared between images
on disk, rm/gc keep what is used and remove what is not, a crashed import
leaves nothing `image ls` shows, and every kind of bad input exits 125
naming the problem with nothing left in the store. As root and as a user."""

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

import imageutil as iu

FAIL = 125


class ImageStore:
    """`hutch image ...` as one caller, with a store of its own."""

    def __init__(self, runner):
        self.runner = runner
        self.home = runner.make_dir(mode=0o700, name="image-home")
        self.work = runner.make_dir(name="image-src")

    @property
    def images(self):
        return self.home / "images"

    def env(self):
        # Short names are registry.example.test's (docs/images-pull.md).
        return {"HUTCH_HOME": str(self.home), "HUTCH_REGISTRY_DEFAULT": "registry.example.test"}

    def __call__(self, *args, input=None, **kw):
        if input is not None:
            kw["text"] = False
        r = self.runner.run_raw(["image", *args], env=self.env(), input=input, **kw)
        return r

    def hutch(self, *args, **kw):
        return self.runner.run_raw(list(args), env=self.env(), **kw)

    def ok(self, *args, **kw):
        r = self(*args, **kw)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        return r

    def give(self, path):
        """Makes @path (made by the test as root) the caller's."""
        self.runner.chown(path)
        return path

    def inspect(self, name):
        return json.loads(self.ok("inspect", name).stdout)

    def layers(self):
        d = self.images / "layers"
        return sorted(p.name for p in d.iterdir()) if d.is_dir() else []

    def temps(self):
        return sorted(p.name for p in self.images.iterdir() if p.name.startswith(".tmp-"))

    def assert_empty(self):
        """Nothing in the store: no image, no layer, no leftover."""
        r = self.ok("ls", "-q")
        assert r.stdout == "", r.stdout
        assert self.layers() == []
        assert self.temps() == []
        assert sorted(p.name for p in (self.images / "manifests").iterdir()) == []


@pytest.fixture
def store(sbx):
    return ImageStore(sbx)


def import_source(store, fmt):
    """Writes the test image in @fmt below the store's work folder; returns
    (path or '-', stdin bytes or None, the image)."""
    w = store.work
    if fmt == "oci-layout":
        img = iu.write_oci_layout(w / "layout")
        return store.give(w / "layout"), None, img
    if fmt == "oci-archive":
        img = iu.write_oci_archive(w / "oci.tar", w)
        return store.give(w / "oci.tar"), None, img
    if fmt == "oci-archive-zstd":
        img = iu.write_oci_archive(w / "ociz.tar", w, image=iu.make_image(
            compression=("zstd", "gzip")))
        return store.give(w / "ociz.tar"), None, img
    if fmt == "docker-archive":
        img = iu.write_docker_archive(w / "docker.tar")
        return store.give(w / "docker.tar"), None, img
    if fmt == "rootfs-tar":
        iu.write_rootfs_tar(w / "rootfs.tar.gz", "gzip")
        return store.give(w / "rootfs.tar.gz"), None, None
    if fmt == "stdin":
        img = iu.write_oci_archive(w / "stdin.tar", w)
        return "-", (w / "stdin.tar").read_bytes(), img
    raise ValueError(fmt)


FORMATS = ["oci-layout", "oci-archive", "oci-archive-zstd", "docker-archive", "rootfs-tar",
           "stdin"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_imports_with_its_config(store, fmt):
    src, data, img = import_source(store, fmt)
    r = store.ok("import", str(src), "box:1", input=data)
    out = r.stdout.decode() if isinstance(r.stdout, bytes) else r.stdout
    digest = out.strip().splitlines()[-1]
    assert digest.startswith("sha256:") and len(digest) == 71, out
    info = store.inspect("box:1")
    assert info["digest"] == digest
    assert info["names"] == ["box:1"]  # NAME replaces the archive's own names
    assert store.inspect(digest)["digest"] == digest
    assert store.inspect(digest[7:19])["digest"] == digest  # an id prefix
    if fmt == "rootfs-tar":
        assert info["format"] == "rootfs-tar"
        assert len(info["layers"]) == 1
        assert info["config"]["Cmd"] is None and info["config"]["Env"] is None
    else:
        assert len(info["layers"]) == 2
        assert [l["diff_id"] for l in info["layers"]] == img.diff_ids
        assert info["config"]["Env"] == iu.CONFIG["Env"]
        assert info["config"]["WorkingDir"] == "/home/app"
        assert info["config"]["User"] == "app"
        assert info["config"]["Cmd"] == iu.CONFIG["Cmd"]
        assert info["config"]["architecture"] == "amd64"
    if fmt in ("oci-layout", "oci-archive", "oci-archive-zstd", "stdin"):
        assert digest == img.digest  # an OCI image keeps its manifest's digest
    assert info["layers"][0]["size"] >= iu.BUSYBOX.stat().st_size
    assert info["skipped_devices"] == 1  # dev/null of layer 0
    assert info["user_owned"] == (store.runner.mode == "user")
    # ls shows it, once per name.
    ls = store.ok("ls").stdout
    assert "box:1" in ls and digest[7:19] in ls
    listed = json.loads(store.ok("ls", "--json").stdout)
    assert [i["digest"] for i in listed] == [digest]
    assert store.temps() == []


def test_layers_have_overlay_semantics(store):
    src, _, img = import_source(store, "oci-layout")
    store.ok("import", str(src))
    info = store.inspect("busybox")
    # Without NAME, the archive's own (io.containerd.image.name), short.
    assert info["names"] == ["busybox:latest"]
    assert store.inspect("registry.example.test/library/busybox:latest")["digest"] == info["digest"]
    low, top = (Path(l["path"]) for l in info["layers"])
    assert low.parent.name == img.diff_ids[0][7:] and top.parent.name == img.diff_ids[1][7:]
    # The whiteout: a character device 0:0 where data/gone was.
    st = os.lstat(top / "data" / "gone")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0
    assert not (top / "data" / ".wh.gone").exists()
    # The opaque directory, and its negative twin.
    assert os.getxattr(top / "opq", "user.overlay.opaque") == b"y"
    with pytest.raises(OSError):
        os.getxattr(low / "opq", "user.overlay.opaque")
    assert not (top / "opq" / ".wh..wh..opq").exists()
    # The hard link is one inode; symlinks are kept as they are.
    assert os.stat(low / "bin" / "hardlink").st_ino == os.stat(low / "bin" / "busybox").st_ino
    assert os.readlink(low / "bin" / "sh") == "busybox"
    # Device nodes are left out.
    assert not os.path.lexists(low / "dev" / "null")
    assert (low / "etc" / "motd").read_text() == "layer0\n"
    assert (top / "etc" / "motd").read_text() == "layer1\n"
    owned = os.lstat(top / "home" / "app" / "owned")
    if store.runner.mode == "root":
        # The image's own ids, for the sandbox to map into its range.
        assert (owned.st_uid, owned.st_gid) == (1000, 1000)
        assert os.lstat(low / "bin" / "busybox").st_uid == 0
        assert not (top.parent / "owners").exists()
    else:
        # The user's files; the image's ids are recorded.
        assert (owned.st_uid, owned.st_gid) == (store.runner.uid, store.runner.gid)
        records = (top.parent / "owners").read_bytes().split(b"\0")
        assert b"1000:1000" in records and b"home/app/owned" in records
    # The store is private.
    assert stat.S_IMODE(os.stat(store.images).st_mode) == 0o700


def test_layers_are_shared_between_images_on_disk(store):
    src, _, img = import_source(store, "oci-layout")
    store.ok("import", str(src), "one:1")
    docker = iu.write_docker_archive(store.work / "d.tar")
    store.give(store.work / "d.tar")
    store.ok("import", str(store.work / "d.tar"), "two:1")
    # A third image: layer 0 the same, another layer 1.
    other = iu.make_image(layers=[iu.layer0(), iu.layer_with([("file", "other", b"x")])])
    iu.write_oci_layout(store.work / "other", other, ref=None)
    store.give(store.work / "other")
    store.ok("import", str(store.work / "other"), "three:1")
    one, two, three = (store.inspect(n) for n in ("one:1", "two:1", "three:1"))
    assert one["digest"] != two["digest"] != three["digest"]
    assert docker.diff_ids == img.diff_ids
    for a, b, f in zip(one["layers"], two["layers"], ("bin/busybox", "etc/motd")):
        assert a["path"] == b["path"]
        assert os.stat(Path(a["path"]) / f).st_ino == os.stat(Path(b["path"]) / f).st_ino
    assert three["layers"][0]["path"] == one["layers"][0]["path"]
    assert three["layers"][1]["path"] != one["layers"][1]["path"]
    assert len(store.layers()) == 3


def test_rm_keeps_what_others_use_and_gc_cleans(store):
    src, _, img = import_source(store, "oci-layout")
    store.ok("import", str(src), "a:1")
    store.ok("import", str(src), "b:1")  # the same image, a second name
    other = iu.make_image(layers=[iu.layer0(), iu.layer_with([("file", "other", b"x")])])
    iu.write_oci_layout(store.work / "other", other, ref=None)
    store.give(store.work / "other")
    store.ok("import", str(store.work / "other"), "c:1")
    assert len(store.layers()) == 3
    # A name of an image with another name: only the name goes.
    assert store.ok("rm", "a:1").stdout.startswith("untagged")
    assert store("inspect", "a:1").returncode == FAIL
    assert store.inspect("b:1")["digest"] == img.digest
    # Its last name: the image goes, and its layer no other image uses.
    assert store("rm", "b").returncode == FAIL  # b is b:latest
    assert store.ok("rm", "b:1").stdout.startswith("removed")
    assert store("inspect", "b:1").returncode == FAIL
    assert len(store.layers()) == 2
    assert Path(store.inspect("c:1")["layers"][0]["path"]).is_dir()
    r = store("rm", "nothing:here")
    assert r.returncode == FAIL and "no image 'nothing:here'" in r.stderr
    store.ok("rm", "c:1")
    store.assert_empty()
    assert store.ok("gc").stdout.strip() == "removed 0"


def test_rm_is_refused_while_a_sandbox_uses_the_image(store):
    src, _, img = import_source(store, "oci-layout")
    store.ok("import", str(src), "used:1")
    r = store.hutch("create", "user1")
    assert r.returncode == 0, r.stderr
    # The mark h17b's create --image writes (image_store_use(), the
    # layout of docs/images.md).
    marks = store.images / "refs" / img.digest[7:]
    marks.mkdir(mode=0o700)
    (marks / "sandbox:user1").touch()
    store.give(marks)
    r = store("rm", "used:1")
    assert r.returncode == FAIL and "used by sandbox user1" in r.stderr, r.stderr
    assert store.inspect("used:1")["digest"] == img.digest
    # Negative twin: the sandbox gone, the mark is stale and rm works.
    assert store.hutch("rm", "user1").returncode == 0
    assert store.ok("rm", "used:1").stdout.startswith("removed")
    store.assert_empty()


def test_a_crashed_import_leaves_nothing_ls_shows_and_gc_removes_it(store):
    src, data, _ = import_source(store, "stdin")
    p = subprocess.Popen(store.runner.argv(["image", "import", "-"], verb=None),
                         env=store.runner.env(store.env()), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=str(store.runner.base_dir))
    try:
        p.stdin.write(data[: len(data) // 2])
        p.stdin.flush()
        # Wait for the import's temporary folder (the event: it exists).
        deadline = time.monotonic() + 30
        while not (store.images.is_dir() and store.temps()):
            assert time.monotonic() < deadline, "the import made no temporary folder"
            assert p.poll() is None, p.stderr.read()
            time.sleep(0.01)
        # The folder is there, held by the import: gc leaves it alone.
        assert store.ok("gc").stdout.strip() == "removed 0"
        assert store.temps() != []
        p.kill()
    finally:
        p.kill()
        p.wait()
        p.stdin.close()
    assert store.ok("ls", "-q").stdout == ""
    assert store.temps() != []
    removed = int(store.ok("gc").stdout.split()[-1])
    assert removed >= 1
    store.assert_empty()
    # A complete layer no image names (a crash after a layer's rename).
    lay = store.images / "layers" / ("0" * 64)
    (lay / "root").mkdir(parents=True)
    store.give(lay)
    assert store.ok("ls", "-q").stdout == ""
    store.ok("gc")
    store.assert_empty()


# ---- bad input ----


def corrupt_layer_blob(store):
    img = iu.write_oci_layout(store.work / "bad")
    blob = store.work / "bad" / "blobs" / "sha256" / img.blobs[1].__class__.__name__
    blob = store.work / "bad" / "blobs" / "sha256" / iu.sha256(img.blobs[1])[7:]
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    return store.work / "bad", "corrupt"


def wrong_diff_id(store):
    img = iu.make_image()
    img.diff_ids[1] = iu.sha256(b"something else")
    img.config = iu.make_config(img.diff_ids)
    img.__init__.__func__  # keep flake quiet
    bad = iu.Image(layers=img.tars, compression=img.compression)
    bad.config = img.config
    bad.manifest = json.dumps({
        "schemaVersion": 2, "mediaType": iu.MT_MANIFEST,
        "config": {"mediaType": iu.MT_CONFIG, "digest": iu.sha256(bad.config),
                   "size": len(bad.config)},
        "layers": [{"mediaType": iu.MT_LAYER[c], "digest": iu.sha256(b), "size": len(b)}
                   for c, b in zip(bad.compression, bad.blobs)],
    }).encode()
    iu.write_oci_layout(store.work / "bad", bad)
    return store.work / "bad", "diff id"


def layer_image(store, entries, compression=("none",)):
    img = iu.make_image(layers=[iu.layer_with(entries)], compression=compression)
    iu.write_oci_layout(store.work / "bad", img)
    return store.work / "bad"


def dotdot_entry(store):
    return layer_image(store, [("file", "../escape", b"x")]), "'..'"


def absolute_entry(store):
    return layer_image(store, [("file", "/etc/escape", b"x")]), "absolute"


def hardlink_out(store):
    return layer_image(store, [("hardlink", "x", "../../etc/passwd")]), "'..'"


def hardlink_absolute(store):
    return layer_image(store, [("hardlink", "x", "/etc/passwd")]), "absolute"


def hardlink_not_in_layer(store):
    return layer_image(store, [("hardlink", "x", "etc/passwd")]), "not a file of this layer"


def through_symlink(store):
    target = store.work / "outside"
    target.mkdir()
    store.give(target)
    return layer_image(store, [("symlink", "evil", str(target)),
                               ("file", "evil/pwned", b"x")]), "not a directory of the layer"


def archive_symlink_parent(store):
    """An image archive whose "blobs" is a symlink out, then a file below it."""
    target = store.work / "outside"
    target.mkdir()
    store.give(target)
    t = iu.TarBuilder()
    t.file("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
    t.symlink("blobs", str(target))
    t.file("blobs/sha256/pwned", b"x")
    t.file("index.json", b'{"schemaVersion": 2, "manifests": []}')
    (store.work / "bad.tar").write_bytes(t.bytes())
    return store.work / "bad.tar", "not below a directory"


def other_platform(store):
    arm = iu.make_image(arch="arm64")
    iu.write_oci_layout(store.work / "bad", arm, index_platform=True)
    return store.work / "bad", "linux/amd64"


def unknown_media_type(store):
    img = iu.make_image()
    m = json.loads(img.manifest)
    m["layers"][0]["mediaType"] = "application/vnd.example.unknown"
    img.manifest = json.dumps(m).encode()
    iu.write_oci_layout(store.work / "bad", img)
    return store.work / "bad", "unknown media type"


def truncated_archive(store):
    iu.write_oci_archive(store.work / "full.tar", store.work)
    data = (store.work / "full.tar").read_bytes()
    (store.work / "bad.tar").write_bytes(data[: len(data) * 2 // 3])
    return store.work / "bad.tar", "truncated"


def truncated_layer(store):
    img = iu.make_image(compression=("gzip",))
    img.blobs[0] = img.blobs[0][: len(img.blobs[0]) // 2]
    m = json.loads(img.manifest)
    m["layers"][0] = {"mediaType": iu.MT_LAYER["gzip"], "digest": iu.sha256(img.blobs[0]),
                      "size": len(img.blobs[0])}
    img.manifest = json.dumps(m).encode()
    iu.write_oci_layout(store.work / "bad", img)
    return store.work / "bad", "truncated"


def missing_blob(store):
    img = iu.write_oci_layout(store.work / "bad")
    (store.work / "bad" / "blobs" / "sha256" / iu.sha256(img.blobs[0])[7:]).unlink()
    return store.work / "bad", "missing"


def not_an_image(store):
    (store.work / "bad").mkdir()
    return store.work / "bad", "not an image"


def garbage_manifest(store):
    img = iu.make_image()
    img.manifest = b"{not json"
    iu.write_oci_layout(store.work / "bad", img)
    return store.work / "bad", "not JSON"


BAD = [corrupt_layer_blob, wrong_diff_id, dotdot_entry, absolute_entry, hardlink_out,
       hardlink_absolute, hardlink_not_in_layer, through_symlink, archive_symlink_parent,
       other_platform,
       unknown_media_type, truncated_archive, truncated_layer, missing_blob, not_an_image,
       garbage_manifest]


@pytest.mark.parametrize("make", BAD, ids=[f.__name__ for f in BAD])
def test_bad_input_exits_125_naming_it_and_leaves_nothing(store, make):
    path, words = make(store)
    store.give(path)
    r = store("import", str(path), "bad:1")
    assert r.returncode == FAIL, (r.returncode, r.stdout, r.stderr)
    assert words in r.stderr, r.stderr
    assert r.stdout == ""
    store.assert_empty()
    assert not (store.work / "escape").exists()
    if (store.work / "outside").exists():
        assert list((store.work / "outside").iterdir()) == []


def test_device_nodes_are_left_out_and_said(store):
    path = layer_image(store, [("dir", "dev", None), ("device", "dev/console", None),
                               ("blockdev", "dev/sda", None), ("file", "ok", b"ok")])
    store.give(path)
    r = store.ok("import", str(path), "dev:1")
    assert "device nodes left out" in r.stderr
    info = store.inspect("dev:1")
    assert info["skipped_devices"] == 2
    low = Path(info["layers"][0]["path"])
    assert (low / "ok").read_text() == "ok"
    assert not os.path.lexists(low / "dev" / "console")
    assert not os.path.lexists(low / "dev" / "sda")


def test_index_picks_linux_amd64(store):
    arm = iu.make_image(arch="arm64", layers=[iu.layer_with([("file", "arm", b"arm")])])
    amd = iu.make_image()
    iu.write_oci_layout(store.work / "multi", amd, index_platform=True, extra_manifests=[arm])
    store.give(store.work / "multi")
    out = store.ok("import", str(store.work / "multi"), "multi:1").stdout.strip()
    assert out == amd.digest


def test_bad_names_are_refused(store):
    src, _, _ = import_source(store, "oci-layout")
    for name in ("UPPER:1", "a b", "x:" + "t" * 200, "_x", "a//b", "a:b:c"):
        r = store("import", str(src), name)
        assert r.returncode == FAIL and "not an image name" in r.stderr, (name, r.stderr)
    store.assert_empty()
