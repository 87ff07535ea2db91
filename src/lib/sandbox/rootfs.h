/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Builds the sandbox's filesystem view (the `host` base, DESIGN.md §3-§4)
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
} RootfsConfig;

/* Builds the tree and pivots into it; the working directory is left at the
 * new "/". Returns 0 or -errno with @reterr naming the step and path. */
int rootfs_setup(const RootfsConfig *c, HutchError *reterr);

/* Appends the sandbox CA (@ca_fd, a memfd from the supervisor, PEM) to the
 * bundle file made by rootfs_setup() with ca_bundle and, when @hash is not
 * 0, writes it alone as SANDBOX_CA_DIR/<hash>.0 for SSL_CERT_DIR users;
 * then makes the tmpfs read-only. Returns 0 or -errno with @reterr
 * filled. */
int rootfs_install_ca_bundle(int ca_fd, uint64_t hash, HutchError *reterr);

/* Returns the writable paths of the finished tree (for landlock), as a new
 * NULL-terminated vector in @ret. */
int rootfs_writable_paths(const Policy *p, char ***ret);

/* The system directories bound read-only from the host, in order. */
extern const char *const rootfs_system_dirs[];
