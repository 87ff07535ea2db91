/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Copies directory trees: the workspace for `--workspace DIR:copy`
 * (copy_tree()) and, with more of each entry kept, a sandbox's overlay
 * layers for snapshots (copy_tree_full() with CopyFlags, see store/layers.h).
 * One walker and one file copier serve both.
 *
 * SECURITY: the copy never leaves the source tree and never links to it:
 * every entry is opened relative to its parent's fd with O_NOFOLLOW, symlinks
 * are recreated as symlinks (never followed, whatever they point at), hard
 * links become independent copies, setuid/setgid bits are dropped, and
 * device nodes and sockets are skipped (an overlayfs whiteout, the character
 * device 0:0, is recreated only with COPY_WHITEOUTS). Depth is capped at
 * COPY_MAX_DEPTH. */

#include "hutch-error.h"

#define COPY_MAX_DEPTH 128

typedef enum CopyFlags {
        /* Extended attributes of the user.* namespace (user.overlay.* included)
         * of regular files and directories. Other namespaces are never copied. */
        COPY_XATTRS = 1 << 0,
        /* Owner and group of every entry. An entry whose ids already equal the
         * new entry's is left alone, so an unprivileged caller copying its own
         * files never needs chown(); any other id it cannot set is an error. */
        COPY_OWNERSHIP = 1 << 1,
        /* Overlayfs whiteouts (character devices 0:0), which an unprivileged
         * caller may create too. Other devices are skipped all the same. */
        COPY_WHITEOUTS = 1 << 2,
        /* The top directory's own mode, times, xattrs and owner (as the flags
         * above say) are copied onto @dst_dirfd as well. */
        COPY_ROOT = 1 << 3,
} CopyFlags;

typedef struct CopyOptions {
        CopyFlags flags;
        const char *what; /* named in error messages: "the workspace" */
} CopyOptions;

/* Copies the contents of the directory @src_dirfd into the (empty)
 * directory @dst_dirfd (both opened O_RDONLY|O_DIRECTORY), keeping modes
 * and access and modification times of every entry. Regular files are
 * cloned (FICLONE) where the filesystem can, else copied with
 * copy_file_range(), else read and written. FIFOs are recreated. Returns 0
 * or -errno with @reterr naming the entry that failed (-ENOSPC when the
 * destination is full, -ELOOP past COPY_MAX_DEPTH, -ESTALE when an entry was
 * swapped while being copied). */
int copy_tree_full(int src_dirfd, int dst_dirfd, const CopyOptions *opts, HutchError *reterr);

/* copy_tree_full() with no flags, for the workspace. */
int copy_tree(int src_dirfd, int dst_dirfd, HutchError *reterr);

/* Copies the data of the regular file @from (from its start) to the empty
 * regular file @to: FICLONE, else copy_file_range(), else read/write.
 * Returns 0 or -errno. */
int copy_file_data(int from, int to);
