# SPDX-License-Identifier: LGPL-2.1-or-later
"""Images built offline by the tests themselves (docs/images.md), for the
image store's tests and every test that needs an image (run --image, pull,
apt): a busybox-static userland in two layers, written as an OCI image
layout directory, an OCI archive (tar of the layout), a `docker save`
archive (the legacy format: manifest.json + <id>/layer.tar), or a plain
root filesystem tar.

The image (make_image()):
  layer 0: bin/busybox (a copy of the host's busybox-static) and applet
           symlinks, bin/hardlink (a hard link to bin/busybox), etc/passwd
           (root and app, uid 1000), etc/group, home/app (1000:1000),
           data/keep, data/gone, opq/old, etc/motd "layer0", dev/null
           (a device node: left out)
  layer 1: data/.wh.gone (deletes data/gone), opq/.wh..wh..opq (hides
           opq/old) and opq/new, etc/motd "layer1", home/app/owned
           (1000:1000)
  config:  Env PATH=/bin, GREETING=hello; WorkingDir /home/app; User app;
           Cmd ["/bin/sh", "-c", "echo hello from the image"]

Everything is deterministic (fixed mtimes, sorted entries), so the same
call makes the same digests."""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
APPLETS = ["sh", "ls", "cat", "echo", "id", "stat", "pwd", "env", "true", "false", "test"]
MTIME = 1700000000
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = {
    "none": "application/vnd.oci.image.layer.v1.tar",
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}
CONFIG = {
    "Env": ["PATH=/bin", "GREETING=hello"],
    "WorkingDir": "/home/app",
    "User": "app",
    "Cmd": ["/bin/sh", "-c", "echo hello from the image"],
}


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class TarBuilder:
    """A tar stream in memory, entries added in order."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)

    def _info(self, name, type_, mode, uid=0, gid=0):
        ti = tarfile.TarInfo(name)
        ti.type = type_
        ti.mode = mode
        ti.uid, ti.gid = uid, gid
        ti.uname = ti.gname = ""
        ti.mtime = MTIME
        return ti

    def dir(self, name, mode=0o755, uid=0, gid=0):
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode, uid, gid))

    def file(self, name, data, mode=0o644, uid=0, gid=0):
        ti = self._info(name, tarfile.REGTYPE, mode, uid, gid)
        ti.size = len(data)
        self.tar.addfile(ti, io.BytesIO(data))

    def symlink(self, name, target):
        ti = self._info(name, tarfile.SYMTYPE, 0o777)
        ti.linkname = target
        self.tar.addfile(ti)

    def hardlink(self, name, target):
        ti = self._info(name, tarfile.LNKTYPE, 0o755)
        ti.linkname = target
        self.tar.addfile(ti)

    def device(self, name, major=1, minor=3, char=True):
        ti = self._info(name, tarfile.CHRTYPE if char else tarfile.BLKTYPE, 0o666)
        ti.devmajor, ti.devminor = major, minor
        self.tar.addfile(ti)

    def bytes(self):
        self.tar.close()
        return self.buf.getvalue()


def layer0():
    t = TarBuilder()
    for d in ("bin", "etc", "home", "data", "opq", "dev", "tmp"):
        t.dir(d, 0o1777 if d == "tmp" else 0o755)
    t.file("bin/busybox", BUSYBOX.read_bytes(), 0o755)
    for a in APPLETS:
        t.symlink(f"bin/{a}", "busybox")
    t.hardlink("bin/hardlink", "bin/busybox")
    t.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n")
    t.file("etc/group", b"root:x:0:\napp:x:1000:\n")
    t.file("etc/motd", b"layer0\n")
    t.dir("home/app", 0o755, 1000, 1000)
    t.file("data/keep", b"keep\n")
    t.file("data/gone", b"gone\n")
    t.file("opq/old", b"old\n")
    t.device("dev/null")
    return t.bytes()


def layer1():
    t = TarBuilder()
    t.dir("data")
    t.file("data/.wh.gone", b"")
    t.dir("opq")
    t.file("opq/.wh..wh..opq", b"")
    t.file("opq/new", b"new\n")
    t.dir("etc")
    t.file("etc/motd", b"layer1\n")
    t.dir("home/app", 0o755, 1000, 1000)
    t.file("home/app/owned", b"mine\n", 0o644, 1000, 1000)
    return t.bytes()


def compress(data, how):
    if how == "none":
        return data
    if how == "gzip":
        return gzip.compress(data, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True,
                               check=True).stdout
    raise ValueError(how)


def make_config(diff_ids, config=None, arch="amd64"):
    return json.dumps({
        "architecture": arch,
        "os": "linux",
        "config": CONFIG if config is None else config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }, sort_keys=True).encode()


class Image:
    """An image's parts: uncompressed layer tars, blobs, config, manifest."""

    def __init__(self, layers=None, compression=("gzip", "none"), config=None, arch="amd64"):
        self.tars = layers if layers is not None else [layer0(), layer1()]
        comp = list(compression) + [compression[-1]] * len(self.tars)
        self.compression = comp[:len(self.tars)]
        self.blobs = [compress(t, c) for t, c in zip(self.tars, self.compression)]
        self.diff_ids = [sha256(t) for t in self.tars]
        self.config = make_config(self.diff_ids, config, arch)
        self.arch = arch
        self.manifest = json.dumps({
            "schemaVersion": 2,
            "mediaType": MT_MANIFEST,
            "config": {"mediaType": MT_CONFIG, "digest": sha256(self.config),
                       "size": len(self.config)},
            "layers": [{"mediaType": MT_LAYER[c], "digest": sha256(b), "size": len(b)}
                       for c, b in zip(self.compression, self.blobs)],
        }, sort_keys=True).encode()

    @property
    def digest(self):
        return sha256(self.manifest)


def make_image(**kw):
    return Image(**kw)


def write_blob(root, data):
    d = Path(root) / "blobs" / "sha256"
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha256(data).hexdigest()).write_bytes(data)


def write_oci_layout(root, image=None, ref="busybox:latest", index_platform=False,
                     extra_manifests=()):
    """Writes @image as an OCI image layout at @root (made if needed).
    index_platform: index.json points at a nested index with a platform
    per manifest (@extra_manifests are other platforms' images)."""
    image = image or make_image()
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    for img in (image, *extra_manifests):
        for b in (*img.blobs, img.config, img.manifest):
            write_blob(root, b)
    ann = {"io.containerd.image.name": f"registry.example.test/library/{ref}",
           "org.opencontainers.image.ref.name": ref.split(":")[-1]} if ref else {}
    if index_platform:
        sub = json.dumps({
            "schemaVersion": 2,
            "mediaType": MT_INDEX,
            "manifests": [{"mediaType": MT_MANIFEST, "digest": img.digest,
                           "size": len(img.manifest),
                           "platform": {"os": "linux", "architecture": img.arch}}
                          for img in (*extra_manifests, image)],
        }).encode()
        write_blob(root, sub)
        top = {"mediaType": MT_INDEX, "digest": sha256(sub), "size": len(sub)}
    else:
        top = {"mediaType": MT_MANIFEST, "digest": image.digest, "size": len(image.manifest)}
    if ann:
        top["annotations"] = ann
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return image


def tar_dir(src, out, compression=None):
    """A tar of the directory @src's contents (entries relative to it)."""
    mode = {"gzip": "w:gz", None: "w"}[compression]
    with tarfile.open(out, mode, format=tarfile.PAX_FORMAT) as t:
        for p in sorted(Path(src).rglob("*")):
            t.add(p, arcname=str(p.relative_to(src)), recursive=False)
    return out


def write_oci_archive(out, workdir, image=None, **kw):
    layout = Path(workdir) / "layout-for-archive"
    image = write_oci_layout(layout, image, **kw)
    tar_dir(layout, out)
    shutil.rmtree(layout)
    return image


def write_docker_archive(out, image=None, tags=("busybox:latest",), workdir=None):
    """The legacy `docker save` format: manifest.json, <hex>.json (the
    config), <n>/layer.tar (uncompressed), repositories."""
    image = image or make_image(compression=("none",))
    t = TarBuilder()
    cfg_name = hashlib.sha256(image.config).hexdigest() + ".json"
    layers = []
    for i, tar in enumerate(image.tars):
        d = hashlib.sha256(f"layer{i}".encode() + tar[:64]).hexdigest()
        t.dir(d)
        t.file(f"{d}/layer.tar", tar)
        t.file(f"{d}/VERSION", b"1.0")
        layers.append(f"{d}/layer.tar")
    t.file(cfg_name, image.config)
    t.file("manifest.json", json.dumps([{"Config": cfg_name, "RepoTags": list(tags),
                                         "Layers": layers}]).encode())
    Path(out).write_bytes(t.bytes())
    return image


def write_rootfs_tar(out, compression="none"):
    """A plain root filesystem (layer 0 alone), as `docker import` takes."""
    data = layer0()
    Path(out).write_bytes(compress(data, compression))
    return sha256(data)


def layer_with(entries):
    """A layer tar of @entries: (kind, name, arg) tuples, kind one of dir,
    file, symlink, hardlink, device, blockdev."""
    t = TarBuilder()
    for kind, name, arg in entries:
        if kind == "dir":
            t.dir(name)
        elif kind == "file":
            t.file(name, arg)
        elif kind == "symlink":
            t.symlink(name, arg)
        elif kind == "hardlink":
            t.hardlink(name, arg)
        elif kind == "device":
            t.device(name)
        elif kind == "blockdev":
            t.device(name, 8, 0, char=False)
        else:
            raise ValueError(kind)
    return t.bytes()


def chown_tree(path, uid, gid):
    os.lchown(path, uid, gid)
    for p in Path(path).rglob("*"):
        os.lchown(p, uid, gid)
