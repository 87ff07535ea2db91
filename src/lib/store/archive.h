/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The snapshot archive: `hutch snapshot export` / `import` turn a chain of
 * overlayfs layers (directories, `userxattr` conventions) into one
 * `.tar.zst` file and back (docs/architecture.md §4).
 *
 * The file is a pax tar stream in one zstd frame (both by libarchive),
 * followed by a zstd skippable frame. The tar entries, in this order:
 *
 *   manifest.json    the caller's JSON object plus "format":
 *                    "hutch-snapshot", "format_version": 1 and "layers":
 *                    [{"dir": "layers/0", "entries": N,
 *                      "files": {"<relpath>": "<sha256 hex>", ...}}, ...]
 *                    (layer 0 is the top; N counts the layer's entries, its
 *                    root directory included; "files" lists every regular
 *                    file of the layer with the SHA-256 of its content)
 *   layers/<i>/...   each layer's tree, layer by layer, each directory
 *                    before what it holds, names in strcmp() order:
 *                    directories, regular files, symlinks and whiteouts
 *                    (character devices 0:0), with mode, uid/gid (numbers,
 *                    as stored in the layer), mtime (to the nanosecond),
 *                    and user.* xattrs (pax SCHILY.xattr records) on
 *                    directories and regular files
 *
 * The skippable frame (magic 0x184D2A50, 40 bytes of content: "HUTCHSUM"
 * and the SHA-256 of every byte of the file before the frame) is skipped by
 * every zstd decoder, so `tar --zstd -xf` reads the file too. Import
 * requires it: libarchive writes zstd frames without their optional content
 * checksum, and the per-file checksums do not cover the metadata, so this
 * is what makes any changed, missing or added byte an error.
 *
 * Export writes the same bytes for the same layers (given the same
 * manifest and libarchive/libzstd versions): nothing depends on readdir()
 * order, the clock or the locale.
 *
 * Bounds (enforced both ways, so that whatever export writes import
 * accepts): at most SNAPSHOT_ARCHIVE_LAYERS_MAX layers,
 * SNAPSHOT_ARCHIVE_ENTRIES_MAX entries in all, SNAPSHOT_ARCHIVE_SIZE_MAX
 * bytes of regular file data in all, a manifest of at most
 * SNAPSHOT_ARCHIVE_MANIFEST_MAX bytes, paths below a layer's root of at
 * most SNAPSHOT_ARCHIVE_PATH_MAX bytes and SNAPSHOT_ARCHIVE_DEPTH_MAX
 * components, and SNAPSHOT_ARCHIVE_XATTR_MAX bytes of xattr names and
 * values per entry. Memory grows with the manifest (the number of files),
 * never with file sizes: data streams through fixed 128 KiB buffers.
 *
 * SECURITY: layers hold whatever a sandbox wrote, and archives come from
 * anywhere. Export never follows a symlink: every entry is opened relative
 * to its parent's fd with O_NOFOLLOW and checked to be the inode listed.
 * Import never uses libarchive's path-based extraction: it creates every
 * entry itself below @dest_dirfd, with the parent resolved by openat2()
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS and the last component created
 * exclusively (O_EXCL, mkdirat, symlinkat, mknodat), so no symlink from the
 * archive (or anything else) is ever followed. */

#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"

#define SNAPSHOT_ARCHIVE_FORMAT "hutch-snapshot"
#define SNAPSHOT_ARCHIVE_FORMAT_VERSION 1

/* Overlayfs itself stacks at most 500 layers; snapshot chains are short. */
#define SNAPSHOT_ARCHIVE_LAYERS_MAX 128
/* About a million files: more than a large distribution image. */
#define SNAPSHOT_ARCHIVE_ENTRIES_MAX (1u << 20)
/* 64 GiB of file data: far beyond a sandbox's disk. */
#define SNAPSHOT_ARCHIVE_SIZE_MAX (UINT64_C(64) << 30)
/* The manifest is read into memory whole; a million file entries fit. */
#define SNAPSHOT_ARCHIVE_MANIFEST_MAX (64u << 20)
/* A path below a layer's root (PATH_MAX less the NUL). */
#define SNAPSHOT_ARCHIVE_PATH_MAX 4095
/* Components of a path below a layer's root (COPY_MAX_DEPTH for
 * workspaces is the same). */
#define SNAPSHOT_ARCHIVE_DEPTH_MAX 128
/* Xattr names and values of one entry (the kernel's XATTR_LIST_MAX and
 * XATTR_SIZE_MAX are 64 KiB each). */
#define SNAPSHOT_ARCHIVE_XATTR_MAX (64u * 1024)

/* Layers hold host ids: a sandbox's own ids shifted by its id base (as
 * root, the subordinate range; a user's sandboxes map only the user's
 * own id). With @ids, export writes every owner relative to that base (0 =
 * the sandbox's root; an id outside the range becomes 0), and import as
 * root adds the importer's base (a relative id beyond its count is
 * refused, -EPERM), so an archive moves between users and machines whose
 * ranges differ. NULL: ids are written and restored as they are. */
typedef struct SnapshotArchiveIds {
        uint32_t uid_base, gid_base, count;
        /* The ranged map of a user with sub-ids (ns/userns.h): relative
         * ids count.. are host ids sub_uid_base.. (sub_count of them);
         * import then restores owners (in the store's user namespace). */
        uint32_t sub_uid_base, sub_gid_base, sub_count;
} SnapshotArchiveIds;

int snapshot_archive_export_ids(const char *manifest_json, const int *layer_dirfds, size_t n_layers,
                                const SnapshotArchiveIds *ids, int out_fd, HutchError *reterr);
int snapshot_archive_import_ids(int in_fd, int dest_dirfd, const SnapshotArchiveIds *ids,
                                char **ret_manifest_json, HutchError *reterr);

/* Writes the layers @layer_dirfds[0..@n_layers) (directory fds, O_PATH is
 * fine, borrowed; index 0 is the top layer) as a snapshot archive to
 * @out_fd, sequentially (a pipe works). @manifest_json is the caller's JSON
 * object (policy, name, creation time...), copied into the manifest as it
 * is, except that "format", "format_version" and "layers" are set (replaced
 * when present, so that an imported manifest can be exported again).
 *
 * The manifest comes first but lists every file's checksum, so each layer is
 * walked twice: pass 1 hashes every regular file and builds the manifest,
 * pass 2 writes the entries, hashing each file again while streaming it.
 * That reads the data twice but needs no temporary file. Layers are
 * immutable; if one changes between the passes anyway, export fails with
 * -ESTALE rather than write an archive that contradicts its manifest.
 *
 * Refused, with @reterr naming the layer and the path: sockets, fifos and
 * device nodes other than 0:0 whiteouts (-EPERM), mount points (-EXDEV),
 * symlinks whose target climbs out of the layer's root, or for an absolute
 * target above the sandbox's root ("/../x") (-EPERM: import refuses them;
 * absolute targets are stored as they are, never followed), regular files whose path is not UTF-8
 * (-EILSEQ: manifest keys are JSON strings), xattr names holding '=' or a
 * newline (-EINVAL: a pax record cannot hold them), and anything past the
 * bounds above (-E2BIG, -EFBIG, -ENAMETOOLONG, -ELOOP). Hard links are
 * written as independent files. Only user.* xattrs are written; others
 * (security.*, trusted.*, ACLs) are left out. Atimes are not kept.
 *
 * Returns 0, -EINVAL for bad arguments (no layers, more than
 * SNAPSHOT_ARCHIVE_LAYERS_MAX, @manifest_json not a JSON object), or
 * -errno, with @reterr filled. After a failure @out_fd holds the start of an
 * archive, which import refuses (it lacks the checksum frame). */
int snapshot_archive_export(const char *manifest_json, const int *layer_dirfds, size_t n_layers,
                            int out_fd, HutchError *reterr);

/* Reads a snapshot archive from @in_fd, sequentially (a pipe works), into
 * @dest_dirfd, which must be an empty directory (-EEXIST otherwise): layer i
 * becomes `layers/<i>` below it (the manifest's "dir"). On success returns
 * 0 and, when @ret_manifest_json is not NULL, the manifest (the archive's
 * manifest.json unchanged, NUL-terminated; the caller frees it).
 *
 * Checked, each failing with @reterr naming what was wrong:
 * - the manifest: the first entry, a regular file "manifest.json" of at
 *   most SNAPSHOT_ARCHIVE_MANIFEST_MAX bytes (-EFBIG), a JSON object whose
 *   "format" is "hutch-snapshot" and whose "format_version" is exactly 1: a
 *   higher version is -EPROTONOSUPPORT, naming both; any other malformation
 *   (a layer without "dir": "layers/<i>", a key a layer does not have, a
 *   checksum that is not 64 lowercase hex digits) is -EINVAL;
 * - every later entry lies below `layers/<i>/` of a listed layer, comes
 *   after that layer's root directory and after its parent directory
 *   (-EINVAL), and is there once (-EEXIST);
 * - refused outright (-EPERM): absolute paths, ".." components, hard links,
 *   block devices, character devices other than 0:0, fifos, sockets,
 *   symlinks whose target climbs out of the layer's root, or for an
 *   absolute target above the sandbox's root (lexically, as
 *   snapshot_archive_symlink_is_contained()), and xattrs other than
 *   user.*; "." or empty components and xattrs on anything but
 *   directories and regular files are -EINVAL;
 * - every regular file is listed in the manifest (-EINVAL) and its
 *   SHA-256, computed while it is written, matches (-EBADMSG); at the end,
 *   every listed file was there and each layer had exactly its "entries"
 *   (-EINVAL), and the checksum frame matches the file (-EBADMSG);
 * - a corrupt or truncated stream, or one that is not zstd: -EBADMSG with
 *   libarchive's message; the bounds above: -E2BIG, -EFBIG, -ENAMETOOLONG,
 *   -ELOOP.
 *
 * Restored: modes without the setuid and setgid bits (the sticky bit is
 * kept), mtimes, user.* xattrs, and uid/gid only when running as root
 * (euid 0); otherwise everything belongs to the caller. Directory modes and
 * mtimes are applied last, so read-only directories can be filled.
 *
 * On failure @dest_dirfd keeps whatever was extracted so far: partial
 * layers without a manifest (import never writes one; it is only ever
 * returned on success), which the caller must not use. The caller removes
 * them, for example with snapshot_archive_clear(), then the directory. */
int snapshot_archive_import(int in_fd, int dest_dirfd, char **ret_manifest_json,
                            HutchError *reterr);

/* Removes everything below the directory @dirfd (not @dirfd itself),
 * without following symlinks or entering other filesystems (-EXDEV), and
 * making each directory writable first, so that an unprivileged caller can
 * empty the read-only ones an import made. Returns 0 or -errno (-ELOOP
 * deeper than SNAPSHOT_ARCHIVE_DEPTH_MAX + 2). */
int snapshot_archive_clear(int dirfd);

/* The path rules of snapshot archives, also used by the image store's
 * layer reader (image/image-layer.c). */
/* Checks the components of the relative path @path and returns their
 * count in @ret_n; on failure @ret_why says what is wrong ("a '..'
 * component"): -EPERM for an absolute path or a ".." component, -EINVAL
 * for an empty path or an empty or "." component, -ENAMETOOLONG for a
 * component longer than NAME_MAX. */
int snapshot_archive_path_check(const char *path, const char **ret_why, unsigned *ret_n);

/* The same for @rel, a path below a layer's root, plus the bounds of
 * archive.h (-ENAMETOOLONG, -ELOOP). */
int snapshot_archive_relpath_check(const char *rel, const char **ret_why);
