/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A persistent microVM sandbox's files, built on the host (docs/vm.md,
 * "Persistent VM sandboxes"). 9p cannot be an overlay's upper layer in the
 * guest, so the overlays are mounted here, exactly as the namespace
 * backend's init mounts them (rootfs_layers_mount(),
 * rootfs_workspace_overlay_mount()): in a user namespace with the
 * sandbox's id mapping and a mount namespace of its own, as its root, with
 * userxattr. A short-lived helper process builds them and hands back a
 * descriptor of each merged directory; QEMU then joins that user
 * namespace as its uid 0 and shares those directories with the guest, so
 * that what the guest writes lands in the sandbox's layer owned as the
 * namespace backend's files are. The mounts are reachable only through
 * those descriptors: they go when the last one is closed.
 *
 * Private to src/lib/sandbox. The caller is single-threaded. */

#include <stddef.h>

#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "vm/vm-run.h"

typedef struct VmLayers {
        int userns_fd; /* the sandbox's user namespace */
        /* The host directories QEMU opens files in (the image cache, the
         * templates, the run directory): idmapped into the user namespace
         * when hutch is root, so that they are its root's there. */
        int cache_fd, template_fd, run_fd;
        /* The shares (VmRun.share_names order): the merged persistent
         * directories, the workspace, the binds. */
        int share_fds[VM_RUN_MAX_SHARE_NAMES];
        size_t n_share_fds;
} VmLayers;

#define VM_LAYERS_NULL                                                                             \
        ((VmLayers){                                                                               \
                .userns_fd = -EBADF, .cache_fd = -EBADF, .template_fd = -EBADF, .run_fd = -EBADF})

/* Builds @p's and @layers' tree for the VM of @v (its run, cache and
 * template directories; the template directory is created). With
 * @v->image the tree is the image's root (vm-image.h; the first share),
 * and @layers may be NULL: a one-shot run, whose upper is a tmpfs and
 * whose workspace the guest copies or overlays. Returns 0,
 * or -errno with @reterr (a persistent directory the sandbox replaced
 * by something else than a directory: -ENOTDIR, naming it). */
int vm_layers_open(const VmRun *v, const SandboxLayerPaths *layers, VmLayers *ret,
                   HutchError *reterr);

/* A one-shot VM as root hutch (`hutch run --backend vm`, docs/vm.md,
 * "Confinement of QEMU"): a user namespace with the sandbox's id mapping
 * for QEMU to join as its root, and the trees QEMU reaches through
 * descriptors, idmapped so that the caller's files are that root's: the
 * workspace and the binds (their host paths in @v->share_names; a copied
 * or overlaid workspace read-only, the rest as the policy says), the
 * cache (read-only), template and run directories. The trees QEMU may
 * write are mapped through a second namespace of the sandbox's root
 * alone, the read-only ones through the sandbox's. No process stays in
 * either namespace. -errno with @reterr; -EPERM when hutch is not
 * root. */
int vm_oneshot_open(VmRun *v, VmLayers *ret, HutchError *reterr);

/* Closes every descriptor (and with the last of them, the mounts). */
void vm_layers_done(VmLayers *l);

/* Points @c at @l: QEMU joins the user namespace and finds the shares,
 * the cache, the templates and the run directory through their
 * descriptors. */
void vm_layers_configure(const VmLayers *l, const VmRun *v, VmConfig *c);
