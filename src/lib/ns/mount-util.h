/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Thin, checked wrappers for the mount operations the sandbox setup uses.
 * All return 0 or -errno and never log. Paths are in the caller's current
 * mount namespace. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Mounts a tmpfs at @path with size @size bytes (0 = kernel default),
 * @mode for its root, and MS_* @flags (nosuid/nodev/noexec...). */
int mount_tmpfs(const char *path, uint64_t size, mode_t mode, unsigned long flags);

/* Recursively bind-mounts @source onto @target. */
int mount_bind(const char *source, const char *target);

/* Sets @attr_set (MOUNT_ATTR_*) on the mount at @path, recursively when
 * @recursive; used for read-only, nosuid, nodev. */
int mount_set_attr(const char *path, uint64_t attr_set, bool recursive);

/* Opens the mount point @path (absolute, without "." or ".." components)
 * below the directory @root_fd, creating what is missing: parents as
 * directories (0755), the last component as a directory when @dir, else as
 * an empty regular file (0444). Returns an O_PATH descriptor of it (to
 * mount on with mount_move_to() or mount_tmpfs_at()), or -errno.
 *
 * SECURITY: nothing on the way is followed. Each component is opened
 * relative to the one before with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) and created with
 * mkdirat()/openat(O_EXCL) in it, so a symlink anywhere in @path (the last
 * component included) is -ELOOP and nothing is made anywhere but below
 * @root_fd. Mounts on the way are entered as a path walk enters them.
 * Other errors: -ENOTDIR (a parent, or with @dir the mount point, is not a
 * directory), -EISDIR (without @dir the mount point is a directory),
 * -EINVAL (@path is not absolute, is "/", or has a "." or ".." component),
 * -ENAMETOOLONG, or what creating it failed with (-EROFS, -EACCES).
 * On failure @reterr_len (when not NULL) gets the length of the prefix of
 * @path that ends with the component that failed. */
int mount_point_open_beneath(int root_fd, const char *path, bool dir, size_t *reterr_len);

/* Mounts a new tmpfs (@size bytes, 0 = kernel default; @mode for its root;
 * MOUNT_ATTR_* @attr) on the mount point @target_fd (an O_PATH descriptor,
 * as mount_point_open_beneath() returns). */
int mount_tmpfs_at(int target_fd, uint64_t size, mode_t mode, uint64_t attr);

/* Attaches the detached mount tree @tree_fd (open_tree(OPEN_TREE_CLONE),
 * fsmount()) on the mount point @target_fd. @tree_fd then refers to the
 * attached tree, for mount_set_attr_fd(). */
int mount_move_to(int tree_fd, int target_fd);

/* mount_set_attr() of the mount whose root @fd refers to. */
int mount_set_attr_fd(int fd, uint64_t attr_set, bool recursive);
