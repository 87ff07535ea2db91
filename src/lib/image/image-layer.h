/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The layer reader: one layer blob (a tar, uncompressed, gzip or zstd, as
 * the OCI image spec's layer media types allow) unpacked into an empty
 * directory as an overlayfs lower layer (store/layers.h), while hashing
 * both the blob (its descriptor's digest) and the uncompressed tar (the
 * config's diff id). It reads untrusted bytes and is fuzzed
 * (tests/fuzz/fuzz-image-layer.c). Internal to src/lib/image/.
 *
 * What an entry becomes:
 * - ".wh..wh..opq" in a directory: the directory gets
 *   user.overlay.opaque = "y" (nothing below shows through);
 * - ".wh.NAME": a whiteout NAME (a character device 0:0), as is a
 *   character device 0:0 itself;
 * - directories, regular files, symlinks (targets kept as they are: never
 *   followed here, and resolved inside the sandbox's root there), FIFOs,
 *   and hard links to an earlier entry of the same layer;
 * - other device nodes and sockets are skipped and counted: a sandbox
 *   has its own /dev, and a device node in an image is never honoured;
 * - xattrs, ACLs and file capabilities are not kept (NEEDSWORK: keep
 *   security.capability for ping-like binaries, rewritten for the
 *   sandbox's user namespace).
 * A later entry replaces an earlier one of the same path. Parents that the
 * tar does not list are created 0755.
 *
 * SECURITY: every path is checked (no "..", no absolute path: -EPERM), the
 * parent of each entry is opened with openat2() RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS and the entry created by name, so nothing escapes
 * @dest_dirfd and no symlink of the layer is ever followed; a hard link's
 * target is checked the same way and must be an entry of this layer. */

#include <stdbool.h>
#include <stdint.h>

#include "hutch-error.h"
#include "image/image-oci.h"
#include "image/image-store.h"

typedef enum ImageLayerOwners {
        /* chown every entry to the ids in the tar (root only) */
        IMAGE_LAYER_OWNERS_KEEP,
        /* leave the caller's ids, make directories u+rwx, and write the
         * tar's ids of entries not owned by 0:0 to @owners_fd */
        IMAGE_LAYER_OWNERS_CALLER,
} ImageLayerOwners;

typedef struct ImageLayerResult {
        char blob_digest[IMAGE_DIGEST_LEN + 1]; /* sha256 of the bytes read */
        char diff_id[IMAGE_DIGEST_LEN + 1];     /* sha256 of the uncompressed tar */
        uint64_t blob_size;
        uint64_t tar_size; /* uncompressed */
        uint64_t size;     /* regular file data */
        uint64_t entries;
        uint64_t skipped_devices;
        OciCompression compression; /* what the blob turned out to be */
} ImageLayerResult;

/* Unpacks the blob read from @blob_fd (sequentially, to EOF) into the
 * empty directory @dest_dirfd (opened O_RDONLY|O_DIRECTORY). @owners_fd is
 * used with IMAGE_LAYER_OWNERS_CALLER (-EBADF: not recorded). Returns 0
 * and fills *@ret, or -errno with @reterr naming the entry: -EPERM for a
 * path that leaves the layer or a hard link out of it, -EBADMSG for a
 * corrupt or truncated blob, -E2BIG past IMAGE_ENTRIES_MAX or
 * IMAGE_SIZE_MAX. What was created is left for the caller to remove. */
int image_layer_unpack(int blob_fd, int dest_dirfd, ImageLayerOwners owners, int owners_fd,
                       ImageLayerResult *ret, HutchError *reterr);
