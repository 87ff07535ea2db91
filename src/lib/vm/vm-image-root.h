/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* An image as a microVM sandbox's root (docs/vm.md, "Images";
 * docs/images-run.md). The root is built on the host, as the namespace
 * backend builds it (rootfs_image_root_mount()): the image's layers from
 * the store, read-only (idmapped through the sandbox's user namespace
 * when hutch is root), below a writable upper (a tmpfs for a one-shot
 * run, the sandbox's own layer for a persistent one), by the short-lived
 * helper of vm-layers.c, which hands back a descriptor of the merged
 * tree. QEMU shares it with the guest as one read-write 9p share, which
 * the agent mounts as the command's root (SETUP's "root=").
 *
 * Private to src/lib/sandbox. */

#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/image-root.h"
#include "sandbox/rootfs.h"

/* Resolves @p's image for a VM (image_root_resolve(): the same errors as
 * the namespace backend's) into @ret; with @mark_run, marks it in use by
 * this run (image_root_mark_run()). The image's User is the agent's to
 * become (an EXEC's "u:"). */
int vm_image_resolve(const Policy *p, bool mark_run, ImageRoot **ret, HutchError *reterr);

/* Opens each of @img's layers as a detached read-only tree in @fds (one
 * per layer, top first), idmapped through @userns_fd when it is >= 0. On
 * failure the descriptors opened so far stay in @fds for the caller to
 * close. 0 or -errno with @reterr. */
int vm_image_layers_open(const ImageRoot *img, int userns_fd, int *fds, HutchError *reterr);

/* Receives the message "im" on @sock, then @img's layers' descriptors, one
 * per layer, in batches (send_fds_batched()), into @fds (room for
 * IMAGE_ROOT_MAX_LAYERS). 0 or -errno with @reterr. */
int vm_image_layers_recv(int sock, const ImageRoot *img, int *fds, HutchError *reterr);

/* In the helper (the sandbox's user and mount namespace, as its root, in
 * its stage with ROOTFS_STAGE created): the image's root at
 * ROOTFS_IMAGE_ROOT, over @img's layers (@fds) and, with @l, a persistent
 * sandbox's snapshot layers, with its upper. 0 or -errno with @reterr. */
int vm_image_root_mount(const Policy *p, const RootfsLayers *l, const ImageRoot *img,
                        const int *fds, HutchError *reterr);

/* With --read-only, in the helper after vm_image_root_mount(): the mount
 * points of @p's workspace, -v binds and --tmpfs mounts made in the
 * image's root, which the guest gets read-only (as rootfs_setup() makes
 * them before it makes the root read-only). SECURITY: each path is walked
 * one component at a time without following a symlink; a component that
 * is there as anything but a directory is -ENOTDIR with @reterr. */
int vm_image_mount_points(const Policy *p, HutchError *reterr);
