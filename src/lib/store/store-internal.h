/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Inside the store: the one walker of a merged view (layers over the host
 * folder) that the manifest, the diff and apply share, and small helpers. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "hutch-error.h"
#include "store/diff.h"

typedef struct WsEntry {
        bool present;
        struct stat st;
        int dirfd;    /* borrowed: the directory holding it */
        size_t layer; /* 0..n_layers-1, or n_layers for the host folder */
} WsEntry;

/* Called for each path of the walk with the entry of the merged view and
 * the host folder's entry at that path (either may be absent; whiteouts
 * are absent). Returns < 0 to stop the walk with that error, 0 to skip
 * what is below this path, > 0 to walk into it (where either is a
 * directory). */
typedef int (*WsWalkFunc)(const char *path, const WsEntry *merged, const WsEntry *host,
                          void *userdata, HutchError *reterr);

/* Walks the union of the merged view of @n_layers layers (top first) over
 * @host_dirfd and of @host_dirfd itself, depth first, each directory's
 * names in byte order. With no layers the merged view is the host folder.
 * Enforces WS_MAX_ENTRIES, WS_MAX_PATH_BYTES, WS_PATH_MAX and WS_MAX_DEPTH.
 * Returns 0, or the first error of @f or of the walk. */
int ws_walk(const int *layer_dirfds, size_t n_layers, int host_dirfd, WsWalkFunc f, void *userdata,
            HutchError *reterr);

/* The workspace type of a mode: FILE, DIR, SYMLINK or OTHER. */
WsEntryType ws_entry_type_from_mode(mode_t mode);

/* Sorts @n changes by path (byte order), DELETED before ADDED at one path. */
void ws_changes_sort(WsChange *changes, size_t n);

/* Opens the directory holding @path under @root_fd (RESOLVE_BENEATH, no
 * symlinks) and points @ret_name at @path's last component. */
int ws_open_parent(int root_fd, const char *path, int *ret_dirfd, const char **ret_name);

/* Opens the regular file @path under @root_fd (RESOLVE_BENEATH, no
 * symlinks, never blocking on a FIFO) for reading: -ESTALE when it is not a
 * regular file. */
int ws_open_regular(int root_fd, const char *path);

/* Fills @reterr with "failed to WHAT 'PATH': ERROR", the path escaped, and
 * returns @r (a negative errno). */
int ws_fail(HutchError *reterr, int r, const char *what, const char *path);

/* Removes the entry @name of @dirfd, a directory with everything in it
 * (never following a symlink, depth capped at WS_MAX_DEPTH). An entry
 * already gone is fine. */
int ws_remove_at(int dirfd, const char *name);
