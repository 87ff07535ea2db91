/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Recursive removal that never follows a symlink: every entry is opened
 * relative to its parent with O_NOFOLLOW, a symlink is unlinked itself. */

#define RM_RF_MAX_DEPTH 256 /* one open directory per level */

/* Removes @name (below @dirfd; AT_FDCWD for a path) and everything in it.
 * A missing @name is success. Returns 0, or the first error (-ELOOP past
 * RM_RF_MAX_DEPTH) after trying every entry. */
int rm_rf_at(int dirfd, const char *name);
