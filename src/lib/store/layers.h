/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Overlayfs layers as hutch stores them: a directory tree in the kernel's
 * overlayfs format with the `userxattr` mount option (hutch mounts them
 * inside a user namespace). Inside a layer:
 *
 * - a whiteout (a lower entry deleted) is a character device 0:0, or a
 *   zero-size regular file carrying the xattr user.overlay.whiteout;
 * - an opaque directory (nothing of the lower layers shows through it)
 *   carries user.overlay.opaque = "y". The value "x" (a directory holding
 *   xattr whiteouts) is not opaque;
 * - redirect_dir and metacopy are not used; other user.overlay.* xattrs are
 *   kept when copying and otherwise ignored.
 *
 * A stack of layers is given top first. For the workspace in overlay mode
 * the host folder is the lowest layer, below all of them (store/diff.h). */

#include <stdbool.h>
#include <sys/stat.h>

#include "hutch-error.h"

#define LAYER_XATTR_OPAQUE "user.overlay.opaque"
#define LAYER_XATTR_WHITEOUT "user.overlay.whiteout"

/* Copies the layer tree @src_dirfd into the empty directory @dst_dirfd
 * exactly, for snapshotting a running sandbox: regular files (reflinked
 * where the filesystem allows), directories, symlinks (recreated, never
 * followed), FIFOs, whiteouts, all user.* xattrs (user.overlay.* included),
 * modes without setuid/setgid, owners (see COPY_OWNERSHIP in
 * src/shared/copy.h: ids the caller cannot set are an error, -EPERM), access
 * and modification times; the same for the top directory itself. Hard links
 * become independent files; sockets and other devices are skipped. Both fds
 * must be opened O_RDONLY|O_DIRECTORY. Returns 0 or -errno with @reterr
 * naming the entry (-ELOOP past COPY_MAX_DEPTH, -ESTALE for an entry
 * swapped while being copied). */
int layer_copy(int src_dirfd, int dst_dirfd, HutchError *reterr);

/* Returns 1 if the entry @name in the layer directory @dirfd, whose
 * lstat is @st, is a whiteout, 0 if not, or -errno. */
int layer_entry_is_whiteout(int dirfd, const char *name, const struct stat *st);

/* Returns 1 if the open directory @dirfd of a layer is opaque (its
 * user.overlay.opaque is "y"), 0 if not, or -errno. */
int layer_dir_is_opaque(int dirfd);
