/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What archive.c, archive-export.c and archive-import.c share: the layout
 * of the format (archive.h), SHA-256 through OpenSSL's EVP, and the path
 * rules that export and import both apply, so that export never writes an
 * archive that import refuses. Not for use outside src/lib/store/archive*. */

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "macro.h"
#include "store/archive.h"

#define MANIFEST_NAME "manifest.json"
#define LAYERS_DIR "layers"
#define LAYERS_PREFIX LAYERS_DIR "/"
/* "layers/", a layer index, "/": what precedes a path below a layer. */
#define LAYER_PREFIX_MAX (sizeof(LAYERS_PREFIX) + 10 + 1)
#define USER_XATTR_PREFIX "user."
#define OVERLAY_XATTR_PREFIX "user.overlay."

/* Whether an archive may carry the xattr @name: user.* only, and of
 * overlayfs's own user.overlay.* (hutch mounts with userxattr, so the
 * kernel obeys them) only what describes a layer's content: opaque
 * directories and whiteouts (store/layers.h). SECURITY: redirect,
 * metacopy, origin and the rest would be fed to the kernel's overlayfs as
 * the archive's author wrote them. */
bool snapshot_archive_xattr_allowed(const char *name);

#define SHA256_LEN 32
#define SHA256_HEX_LEN 64

/* The zstd skippable frame that ends the file (archive.h): magic, length
 * of what follows, tag, and the SHA-256 of every byte before the frame. */
#define SUM_FRAME_MAGIC 0x184D2A50u
#define SUM_FRAME_TAG "HUTCHSUM"
#define SUM_FRAME_TAG_LEN 8
#define SUM_FRAME_SIZE (8 + SUM_FRAME_TAG_LEN + SHA256_LEN)

/* File data streams through buffers of this size, both ways: memory does
 * not grow with file sizes. */
#define IO_BUFFER_SIZE (128u * 1024)

DEFINE_VOID_CLEANUP(struct archive_entry, archive_entry_free)
DEFINE_VOID_CLEANUP(EVP_MD_CTX, EVP_MD_CTX_free)

static inline int sha256_new(EVP_MD_CTX **ret) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();

        if (!md)
                return -ENOMEM;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
                return -EIO;
        *ret = TAKE_PTR(md);
        return 0;
}

static inline int sha256_update(EVP_MD_CTX *md, const void *p, size_t n) {
        return EVP_DigestUpdate(md, p, n) == 1 ? 0 : -EIO;
}

/* Writes the digest of @md into @ret (SHA256_LEN bytes). */
static inline int sha256_final(EVP_MD_CTX *md, uint8_t *ret) {
        unsigned n = 0;

        return EVP_DigestFinal_ex(md, ret, &n) == 1 && n == SHA256_LEN ? 0 : -EIO;
}

/* Writes the digest of @md as lowercase hex into @hex and starts @md over
 * for the next file. */
int snapshot_archive_sha256_hex(EVP_MD_CTX *md, char hex[static SHA256_HEX_LEN + 1]);

/* Whether the symlink at @rel (below a layer's root) pointing to @target
 * stays inside, lexically: @target is not empty, shorter than PATH_MAX,
 * and its ".." components never climb above where it starts: the layer's
 * root for a relative @target (counted from the link's directory), the
 * sandbox's root for an absolute one (a venv's python3 -> /usr/bin/python3
 * is the sandbox's /usr, never the host's: "/../x" is refused). Symlinks
 * met on the way are not considered: nothing in hutch ever follows a
 * symlink of a layer on the host (issue 15). */
bool snapshot_archive_symlink_is_contained(const char *rel, const char *target);

/* The names in a directory, sorted. */
typedef struct SnapshotNames {
        char **names;
        size_t n, alloc;
} SnapshotNames;

void snapshot_names_done(SnapshotNames *l);

/* Lists the entries of the directory @dirfd (without "." and "..") sorted
 * by name (strcmp), so that archives do not depend on readdir()'s order.
 * -E2BIG past SNAPSHOT_ARCHIVE_ENTRIES_MAX names. */
int snapshot_names_list(int dirfd, SnapshotNames *ret);
