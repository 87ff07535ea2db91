# SPDX-License-Identifier: LGPL-2.1-or-later
"""A Debian root filesystem for the image tests (issue 17 "Packages
work"): made with mmdebstrap (--variant=apt) from the Debian mirror of the
HOST's apt sources, read at run time (/etc/apt/sources.list and
/etc/apt/sources.list.d/*.sources and *.list); no mirror's name is written
in this tree. The tar is cached between test runs, keyed by the suite, the
extra packages and the day (UTC), in /var/cache/hutch-tests as root (else
$XDG_CACHE_HOME/hutch-tests), readable by every user (the test user
imports it too); older days' tars of the same key are removed.

A test asks for it with debian_rootfs_tar(); it skips (naming the mirror)
only when there is no Debian mirror in the sources or it is unreachable;
with HUTCH_TEST_MUST_WORK=1 that skip is a failure (conftest)."""

import fcntl
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

SOURCES_LIST = Path("/etc/apt/sources.list")
SOURCES_DIR = Path("/etc/apt/sources.list.d")
# A first build downloads about 60 MB (python3-pip and its dependencies).
BUILD_TIMEOUT = 1800


class Source:
    """One "deb" line of the host's sources: URI, suite, components."""

    def __init__(self, uri, suite, components):
        self.uri = uri.rstrip("/")
        self.suite = suite
        self.components = components or ["main"]

    @property
    def host(self):
        return urlparse(self.uri).hostname or ""

    def line(self):
        return f"deb {self.uri} {self.suite} {' '.join(self.components)}"


def _deb822_sources(text):
    """Sources of a deb822 .sources file: one per suite of each stanza
    with Types: deb (not disabled)."""
    out = []
    for stanza in text.split("\n\n"):
        fields = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
                continue
            if ":" not in line:
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        comps = fields.get("components", "main").split()
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                out.append(Source(uri, suite, comps))
    return out


def _one_line_sources(text):
    out = []
    for line in text.splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) < 3 or parts[0] != "deb":
            continue
        parts = parts[1:]
        if parts[0].startswith("["):  # options: [arch=amd64 signed-by=...]
            while parts and not parts[0].endswith("]"):
                parts = parts[1:]
            parts = parts[1:]
        if len(parts) >= 2:
            out.append(Source(parts[0], parts[1], parts[2:]))
    return out


def host_sources():
    """Every "deb" source of the host, in apt's order of files."""
    out = []
    files = [SOURCES_LIST] if SOURCES_LIST.is_file() else []
    if SOURCES_DIR.is_dir():
        files += sorted(p for p in SOURCES_DIR.iterdir() if p.suffix in (".list", ".sources"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        out += _deb822_sources(text) if f.suffix == ".sources" else _one_line_sources(text)
    return out


def host_mirror():
    """The host's Debian mirror: the first http(s) source of a release
    suite (not -security, -updates or -backports) that publishes
    dists/SUITE/Release with the Debian archive's origin; None if none."""
    for s in host_sources():
        if not s.uri.startswith(("http://", "https://")):
            continue
        if any(s.suite.endswith(x) for x in ("-security", "-updates", "-backports")):
            continue
        return s
    return None


def reachable(src, timeout=20):
    """Does @src answer for its Release file, and is it Debian's archive?"""
    try:
        with urllib.request.urlopen(f"{src.uri}/dists/{src.suite}/Release", timeout=timeout) as r:
            head = r.read(4096).decode(errors="replace")
    except OSError:
        return False
    return "Origin: Debian" in head


def cache_dir():
    if os.geteuid() == 0:
        d = Path("/var/cache/hutch-tests")
    else:
        d = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hutch-tests"
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o755)
    return d


def debian_rootfs_tar(include=("python3-pip",)):
    """The path of a plain root filesystem tar of Debian (the host
    mirror's suite, --variant=apt, plus @include), made on first use of
    the day and cached. Skips when no mirror is reachable."""
    src = host_mirror()
    if src is None:
        pytest.skip("no Debian mirror (http/https 'deb' source) in the host's apt sources")
    if not shutil.which("mmdebstrap"):
        pytest.fail("mmdebstrap is not installed (tools/deps.sh test_pkgs)")
    d = cache_dir()
    prefix = f"debian-{src.suite}-{'+'.join(sorted(include)) or 'apt'}-"
    path = d / f"{prefix}{time.strftime('%Y%m%d', time.gmtime())}.tar"
    if path.is_file():
        return path
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return path
        if not reachable(src):
            pytest.skip(f"the Debian mirror of the host's apt sources ({src.host}) is unreachable")
        tmp = d / f".{os.getpid()}.{path.name}"
        cmd = ["mmdebstrap", "--variant=apt", "--format=tar", "--quiet",
               f"--components={','.join(src.components)}"]
        if include:
            cmd.append(f"--include={','.join(include)}")
        cmd += [src.suite, str(tmp), src.line()]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
            if r.returncode != 0:
                pytest.fail(f"mmdebstrap from {src.host} failed: {r.stderr[-2000:]}")
            os.chmod(tmp, 0o644)
            os.rename(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        for old in d.glob(f"{prefix}*.tar"):
            if old != path:
                old.unlink()
    return path
