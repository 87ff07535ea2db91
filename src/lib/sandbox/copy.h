/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Copies a directory tree for `--workspace DIR:copy`.
 *
 * SECURITY: the copy never leaves the source tree and never links to it:
 * every entry is opened relative to its parent's fd with O_NOFOLLOW, symlinks
 * are recreated as symlinks (never followed, whatever they point at), hard
 * links become independent copies, setuid/setgid bits are dropped, and
 * device nodes and sockets are skipped. Depth is capped at COPY_MAX_DEPTH. */

#include "hutch-error.h"

#define COPY_MAX_DEPTH 128

/* Copies the contents of the directory @src_dirfd into the (empty)
 * directory @dst_dirfd, keeping modes and modification times. Returns 0 or
 * -errno with @reterr naming the entry that failed (-ENOSPC when the
 * destination is full, -ELOOP past COPY_MAX_DEPTH). */
int copy_tree(int src_dirfd, int dst_dirfd, HutchError *reterr);
