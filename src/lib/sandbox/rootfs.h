/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Builds the sandbox's filesystem view (the `host` base, docs/architecture.md §3-§4)
 * from inside the new mount namespace, and pivots into it.
 *
 * Runs in the sandbox init before any user code, as uid 0 of the new user
 * namespace. Afterwards the old root is unmounted: nothing of the host is
 * reachable except the read-only system directories and what the policy
 * binds. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "ns/userns.h"
#include "policy/policy.h"
#include "sandbox/container.h"
#include "sandbox/outcome.h"

/* A persistent sandbox's layers (docs/architecture.md §4), attached by init: the
 * directories /root, /var, /opt, /srv, /home and /mnt come from one overlay
 * whose lower layers are the snapshot layers' root/ over an empty
 * skeleton and whose upper is <data>/<upper>/root; a workspace in overlay
 * mode is an overlay of the snapshot layers' ws/ over the host folder, upper
 * <data>/<upper>/ws. */
typedef struct RootfsLayers {
        int data_fd;              /* detached mount of the sandbox's data dir, or -EBADF */
        const char *data_path;    /* its host path (bound when there is no fd) */
        const char *upper;        /* its current upper layer, "upper-<gen>" */
        const int *layer_fds;     /* detached read-only snapshot layers, top first (-EBADF: bind) */
        char *const *layer_paths; /* their host paths */
        size_t n_layers;
} RootfsLayers;

/* Where the layers are attached while the tree is built (below the
 * current root; created by the caller); gone before the command runs. */
#define ROOTFS_STAGE "/.hutch"

/* The persistent directories (all below "/"), NULL-terminated. */
extern const char *const rootfs_persistent_dirs[];

/* What no sandbox may read of the host's /etc (shadow, gshadow, sudoers,
 * the SSH host keys, ssl/private, ...), as it is here: "f:PATH" for each
 * regular file and "d:PATH" for each directory that exists (NULL when
 * none does). Both backends
 * hide them: the namespace backend with mounts (rootfs_setup()), the
 * microVM backend through the agent's mask= entries. 0 or -ENOMEM. */
int rootfs_masked_paths(char ***ret);

/* An image sandbox's root (docs/images-run.md): an overlay of the image's
 * layers (read-only, top first) over a skeleton of the mount points, with
 * a writable upper: a tmpfs (sized like $HOME) for a one-shot run, the
 * sandbox's own layer (<data>/<upper>/root, over its snapshot layers'
 * root/) for a persistent one. The host's system directories are not
 * there; /proc, /dev, /tmp, the workspace, the binds and the CA bundle
 * are hutch's own, as on the host base. */
typedef struct RootfsImage {
        const int *layer_fds;     /* detached read-only mounts (idmapped as root), or -EBADF */
        char *const *layer_paths; /* their host paths, top first */
        size_t n_layers;
} RootfsImage;

typedef struct RootfsConfig {
        const Policy *policy;
        /* Detached mounts prepared by the supervisor (idmapped when hutch is
         * root), or -EBADF to bind by path: */
        int workspace_fd;
        const int *bind_fds; /* policy->n_binds entries */
        /* With secrets: make the CA bundle file with the host's system CAs,
         * bound over the system bundle, for rootfs_install_ca_bundle() to
         * complete. */
        bool ca_bundle;
        const RootfsLayers *layers; /* persistent sandbox, or NULL */
        const RootfsImage *image;   /* the root is an image, or NULL: the host base */
        /* --allow-degraded: where a new procfs is refused, bind the
         * container's /proc read-only instead (needs landlock). */
        bool allow_host_proc;
        ContainerEngine container; /* names the fix in errors */
} RootfsConfig;

/* Builds the tree and pivots into it (or, where pivot_root is refused,
 * moves it over "/" and chroots: docs/containers.md); the working
 * directory is left at the new "/". *@ret_fallbacks gets the
 * 1 << OutcomeFallback of each weaker path taken. Returns 0 or -errno with
 * @reterr naming the step and path.
 * SECURITY: the mount points of -v and --tmpfs, whose parents may be in the
 * workspace, the persistent directories or another bind, are made after
 * the host's root is detached, each walked from "/" without following a
 * symlink (mount_point_open_beneath()): a symlink in a target's path is
 * -ELOOP, with @reterr naming the target. */
int rootfs_setup(const RootfsConfig *c, unsigned *ret_fallbacks, HutchError *reterr);

/* In a root that is already the calling process's "/" (hutch-oci's
 * container after pivot_root): the CA bundle file of rootfs_setup()'s
 * ca_bundle, with the root's own system CAs (read with RESOLVE_IN_ROOT,
 * as an image's), bound over the root's bundle, for
 * rootfs_install_ca_bundle(). 0 or -errno with @reterr filled. */
int rootfs_ca_bundle_setup(HutchError *reterr);

/* Appends the sandbox CA (@ca_fd, a memfd from the supervisor, PEM) to the
 * bundle file made by rootfs_setup() with ca_bundle and, when @hash is not
 * 0, writes it alone as SANDBOX_CA_DIR/<hash>.0 for SSL_CERT_DIR users;
 * then makes the tmpfs read-only. Returns 0 or -errno with @reterr
 * filled. */
int rootfs_install_ca_bundle(int ca_fd, uint64_t hash, HutchError *reterr);

/* Returns the writable paths of the finished tree (for landlock; with
 * @persistent also the persistent directories), as a new
 * NULL-terminated vector in @ret. */
int rootfs_writable_paths(const Policy *p, bool persistent, char ***ret);

/* The pieces of a persistent sandbox's tree, for the microVM backend's
 * keeper too (which builds them on the host and shares the result with
 * the guest). Both run in the sandbox's user and mount namespace, as its
 * root, with ROOTFS_STAGE created.
 *
 * rootfs_layers_mount() attaches @l's data dir and snapshot layers under
 * ROOTFS_STAGE and mounts the overlay of the persistent directories
 * (userxattr) at ROOTFS_STAGE "/p". rootfs_workspace_overlay_mount()
 * mounts the workspace's overlay on @target: the host folder
 * (@workspace_fd, or bound from @src without one) below the snapshot
 * layers' ws/, with @l's upper ws/ (or, without @l, a tmpfs upper sized
 * by @p). A host path of @l without its descriptor is read through
 * /oldroot (rootfs_setup()'s staging root). 0 or -errno with @reterr. */
int rootfs_layers_mount(const RootfsLayers *l, HutchError *reterr);
int rootfs_workspace_overlay_mount(const Policy *p, const RootfsLayers *l, int workspace_fd,
                                   const char *src, const char *target, HutchError *reterr);

/* An image sandbox's root for the microVM backend's helper (vm-layers.c,
 * docs/vm.md "Images"), as rootfs_setup() builds it: the overlay of
 * @c->image's layers (and with @c->layers, a persistent sandbox's
 * snapshot layers and its upper; else a tmpfs upper) mounted on
 * ROOTFS_IMAGE_ROOT, the layers attached under ROOTFS_STAGE (a tmpfs
 * mounted there). Every layer needs its descriptor. Same conditions as
 * rootfs_layers_mount(). */
#define ROOTFS_IMAGE_ROOT "/newroot"
int rootfs_image_root_mount(const RootfsConfig *c, HutchError *reterr);

/* Where an image's distribution keeps its CA bundle, in the order
 * looked for; the first regular file is the sandbox's system bundle
 * (with secrets). */
extern const char *const rootfs_image_ca_bundles[];

/* The system directories bound read-only from the host, in order. */
extern const char *const rootfs_system_dirs[];
