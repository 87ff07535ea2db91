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

/* Creates the directory @path and its missing parents with @mode. An
 * existing directory is fine; an existing non-directory is -ENOTDIR. */
int mkdir_parents(const char *path, mode_t mode);

/* Creates an empty regular file at @path (and missing parents) to serve as
 * a mount point for a file bind. An existing file is fine. */
int touch_mount_point(const char *path);
