#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tools/deps.sh build|test|bench|vm
#
# Installs the Debian packages hutch needs for one purpose: `build` (compile
# hutch and the probe), `test` (build + unit, integration and lint checks),
# `bench` (build + the peers of bench/bench-run.sh and bench/bench-vm.sh),
# `vm` (what `hutch run --backend vm` needs at run time). As root, missing
# packages are installed with apt-get; otherwise the one command to run is
# printed and the script exits 1. Nothing is done when all are present.
set -euo pipefail

# The one list (docs/style.md §9). libc6-dev provides the static libc the
# probe links against. user-mode-linux boots a pure cgroup v2 kernel for
# tests/integration/test_cgroup_v2.py (this machine is hybrid). pandoc
# writes the man pages (docs/man/meson.build; optional: without it they are
# not built); man-db renders them in tests/integration/test_cli_help.py.
# zlib1g-dev: hutch-proxy decodes gzip/deflate answers before it masks a
# secret in them (docs/secrets.md).
build_pkgs=(meson ninja-build gcc libc6-dev pkg-config libseccomp-dev libjansson-dev libcmocka-dev libevent-dev libhttp-parser-dev libssl-dev libarchive-dev zlib1g-dev pandoc)
# libsystemd-dev: sd-bus, hutch-oci's D-Bus client for the systemd form of
# cgroupsPath (docs/oci.md; optional to meson, -Dsystemd=disabled).
build_pkgs+=(libsystemd-dev)
# npm installs the tests' node packages (undici, the MCP SDK) into their own
# cache; NodeSource's nodejs bundles it (and conflicts with Debian's npm).
test_pkgs=(python3 python3-pytest e2fsprogs clang-format shellcheck strace bubblewrap uidmap util-linux passwd user-mode-linux curl git nodejs npm python3-trustme python3-cryptography python3-requests zstd python3-yaml python3-pip python3-setuptools)
# docker.io and podman: tests/integration/test_in_container.py starts its own
# dockerd and podman (private state dirs) to run hutch inside containers.
test_pkgs+=(docker.io podman runc)
# tests/integration/test_host_mounts.py (issue 24): ip netns, Debian's
# dockerd and client, and the static busybox its image is made of offline.
test_pkgs+=(iproute2 busybox-static)
# tests/integration/test_cli_help.py renders the man pages (man-db) and
# runs the zsh completion.
test_pkgs+=(man-db zsh)
# tests/integration/test_oci.py (issue 21): runc is the negative twin of
# hutch-oci under Podman.
test_pkgs+=(runc)
# tests/integration/test_oci_cni.py (issue 21): hutch-oci runs nft (at run
# time, only for a pod's network namespace with an interface besides lo)
# to put its wall in front of that interface (docs/oci.md).
test_pkgs+=(nftables)
# tests/integration/test_image_pull.py (issue 17): a local registry
# (docker-registry on 127.0.0.1) that skopeo pushes the test's images to.
test_pkgs+=(docker-registry skopeo)
# tests/integration/test_ui.py (issue 23): the dashboard in headless
# Chromium, driven through chromium-driver by Selenium.
test_pkgs+=(chromium chromium-driver python3-selenium)
# tests/integration/test_terminal.py and test_ports_preview.py (issue 18): a
# WebSocket client (and server) nobody here wrote, for serve's exec
# WebSocket and the preview route.
test_pkgs+=(python3-websockets)
# tests/integration/debimage.py (issue 17): the Debian image of
# test_image_apt.py, made from the host's mirror; uidmap's newuidmap and
# newgidmap map a user's sub-ids (test_userns_range.py).
test_pkgs+=(mmdebstrap uidmap)
bench_pkgs=(bubblewrap hyperfine python3 tinyproxy)
# bench/bench-oci.sh: hutch-oci against Debian's runc under podman. Not
# crun: once installed, podman makes it the default runtime, and crun 1.8
# refuses hybrid cgroup hosts (test_in_container.py's podman runs fail).
# bench-oci.sh measures crun when it is there.
bench_pkgs+=(podman runc)
# The microVM backend (docs/vm.md), a run-time dependency of --backend vm
# only: QEMU is the VMM; linux-image-amd64 provides the guest's kernel and
# modules, which hutch only reads (/boot/vmlinuz-*, /lib/modules): it is
# never booted on the host. The initramfs is written by hutch itself (no
# cpio, no busybox). Tests and benchmarks of the backend need them too.
vm_pkgs=(qemu-system-x86 linux-image-amd64)

usage() {
        echo "usage: $0 build|test|bench|vm" >&2
        exit 2
}

[ $# -eq 1 ] || usage
case "$1" in
build) want=("${build_pkgs[@]}") ;;
test) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${vm_pkgs[@]}") ;;
bench) want=("${build_pkgs[@]}" "${bench_pkgs[@]}" "${vm_pkgs[@]}") ;;
vm) want=("${vm_pkgs[@]}") ;;
*) usage ;;
esac

missing=()
for pkg in "${want[@]}"; do
        if [ "$pkg" = npm ] && command -v npm >/dev/null; then
                continue
        fi
        status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
        if [ "$status" != "installed" ]; then
                missing+=("$pkg")
        fi
done

if [ ${#missing[@]} -eq 0 ]; then
        exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
        echo "missing Debian packages; install them with:" >&2
        echo "sudo apt-get install -y ${missing[*]}"
        exit 1
fi

echo "installing: ${missing[*]}" >&2
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
