/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a sandbox changed in an overlay-mode workspace, and merging it back
 * (`hutch diff` / `hutch apply`).
 *
 * The sandbox sees the merged view of a stack of layers (store/layers.h;
 * top first: the sandbox's own upper, then its snapshot layers) over the
 * host folder, which is the lowest layer. ws_diff() compares that view with
 * the host folder as it is now:
 *
 * - an entry in a layer shadows the ones below it; a whiteout deletes;
 *   an opaque directory hides everything below it, host entries included;
 * - a regular file is MODIFIED when its content or permission bits differ
 *   from the host's, a symlink when its target differs, a directory when
 *   its permission bits differ. A file copied up unchanged is no change,
 *   and neither are times, owners, xattrs, or setuid and setgid bits
 *   (which ws_apply() never writes);
 * - a directory that is new (or gone) is one ADDED (DELETED) entry, and
 *   everything in it is listed too, each with the same kind: a caller can
 *   show or apply the directory and its contents alike;
 * - an entry that changed type is DELETED (old type) and ADDED (new type),
 *   in this order, under the same path;
 * - FIFOs, sockets and devices are not workspace content: on either side
 *   they count as absent (a manifest still records them as OTHER).
 *
 * Paths are relative to the folder, without a leading slash, and may hold
 * any byte but NUL (a '/' separates components). Changes are sorted by
 * path, byte by byte, so a directory comes before its contents.
 *
 * The manifest records the host folder when the sandbox is created, so that
 * ws_apply() can tell a change the sandbox made from one the user made on
 * the host meanwhile.
 *
 * SECURITY: all access is relative to the fds given, entry by entry with
 * O_NOFOLLOW or with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a
 * symlink in a layer or planted in the host folder is never followed, and
 * ws_apply() never writes outside the host folder. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "hutch-error.h"

/* Caps on what one workspace may make us hold: entries visited by a walk
 * (and recorded in a manifest), the bytes of their paths, one path's
 * length (PATH_MAX with its NUL), the nesting depth, and the layers of a
 * stack (a walk holds one fd per layer and level). */
#define WS_MAX_ENTRIES (1U << 20)
#define WS_MAX_PATH_BYTES (256U << 20)
#define WS_PATH_MAX 4095
#define WS_MAX_DEPTH 128
#define WS_MAX_LAYERS 128

typedef enum WsChangeKind {
        WS_CHANGE_ADDED,
        WS_CHANGE_MODIFIED,
        WS_CHANGE_DELETED,
        _WS_CHANGE_KIND_MAX,
        _WS_CHANGE_KIND_INVALID = -EINVAL,
} WsChangeKind;

typedef enum WsEntryType {
        WS_ENTRY_FILE,
        WS_ENTRY_DIR,
        WS_ENTRY_SYMLINK,
        WS_ENTRY_OTHER, /* FIFO, socket, device: in manifests only */
        _WS_ENTRY_TYPE_MAX,
        _WS_ENTRY_TYPE_INVALID = -EINVAL,
} WsEntryType;

/* "added", "modified", "deleted"; NULL when out of range. */
const char *ws_change_kind_to_string(WsChangeKind k);
WsChangeKind ws_change_kind_from_string(const char *s);
/* "file", "dir", "symlink", "other"; NULL when out of range. */
const char *ws_entry_type_to_string(WsEntryType t);
WsEntryType ws_entry_type_from_string(const char *s);

typedef struct WsChange {
        char *path;
        WsChangeKind kind;
        WsEntryType type; /* the new entry's, or for DELETED the old one's */
        /* ADDED and MODIFIED: index (top = 0) of the layer holding the new
         * entry (for a directory, the topmost one); 0 for DELETED. */
        size_t layer;
} WsChange;

/* Frees @n changes and their paths; returns NULL. */
WsChange *ws_changes_free(WsChange *changes, size_t n);

/* Returns true if @path is a valid workspace path: relative, not empty, at
 * most WS_PATH_MAX bytes, and no component empty, "." or "..". */
bool ws_path_is_valid(const char *path);

/* Escapes @path for a terminal or a log: backslash, bytes below 0x20,
 * 0x7f and above as \\, \n, \t, \r or \xHH; other bytes as they are. The
 * result is ASCII-printable. Returns 0 or -ENOMEM. */
int ws_path_escape(const char *path, char **ret);

/* ---- manifest ---- */

typedef struct WsManifest WsManifest;

typedef struct WsManifestEntry {
        const char *path; /* owned by the manifest */
        WsEntryType type;
        uint32_t mode; /* permission bits: st_mode & 07777 */
        uint64_t size;
        int64_t mtime_ns;
} WsManifestEntry;

/* Records every entry under the host folder @host_dirfd (type, size,
 * mtime in ns, permission bits and path; no content) into a new manifest.
 * Walks with O_NOFOLLOW; -E2BIG past WS_MAX_ENTRIES or WS_MAX_PATH_BYTES,
 * -ENAMETOOLONG past WS_PATH_MAX, -ELOOP past WS_MAX_DEPTH. */
int ws_manifest_scan(int host_dirfd, WsManifest **ret, HutchError *reterr);

/* ws_manifest_scan() and writes the manifest to @out_fd. The format (v1.0)
 * is binary-safe:
 *
 *   "hutch-ws-manifest 1.0 COUNT LENGTH\n"
 *   LENGTH bytes: COUNT records "T MODE SIZE MTIME_NS PATH\0" sorted by
 *     path, T one of f d l o, the numbers decimal (MTIME_NS may be negative)
 *   "XXXXXXXX\n": CRC-32 (IEEE) of the LENGTH bytes, lowercase hex
 *
 * Returns 0 or -errno. */
int ws_manifest_write(int host_dirfd, int out_fd, HutchError *reterr);

/* Reads a manifest written by ws_manifest_write() from @fd. Every length
 * and count is checked before use: -EPROTONOSUPPORT for another major
 * version, -EBADMSG for anything malformed (a bad header, record, path or
 * CRC, an unsorted or duplicate path, trailing bytes), -EFBIG beyond the
 * caps above. */
int ws_manifest_load(int fd, WsManifest **ret, HutchError *reterr);

WsManifest *ws_manifest_free(WsManifest *m);
DEFINE_POINTER_CLEANUP(WsManifest, ws_manifest_free)

size_t ws_manifest_size(const WsManifest *m);
/* The @i-th entry in path order, or NULL past the end. */
const WsManifestEntry *ws_manifest_entry(const WsManifest *m, size_t i);
/* The entry for @path, or NULL when the manifest has none. */
const WsManifestEntry *ws_manifest_lookup(const WsManifest *m, const char *path);

/* ---- diff ---- */

/* Computes the changes of the merged view of @n_layers layers
 * (@layer_dirfds, top first, each the root of a layer opened
 * O_RDONLY|O_DIRECTORY) over the host folder @host_dirfd, compared with
 * that folder, as the top of this header says. On success the sorted
 * array goes to @ret (free with ws_changes_free()) and its length to
 * @ret_n. Returns 0 or -errno with @reterr naming the path (-E2BIG,
 * -ENAMETOOLONG, -ELOOP past the caps above). */
int ws_diff(const int *layer_dirfds, size_t n_layers, int host_dirfd, WsChange **ret, size_t *ret_n,
            HutchError *reterr);

/* Writes a summary like `git diff --stat` to @f: one line per change,
 * "A ", "M " or "D " and the escaped path (a '/' after a directory), then
 * "N changes: A added, M modified, D deleted" (or "no changes"). Returns 0
 * or -EIO. */
int ws_diff_print_stat(FILE *f, const WsChange *changes, size_t n);

/* Builds a JSON array of {"path", "kind", "type"} objects. A path that is
 * not valid UTF-8 is given escaped (ws_path_escape()) in "path", with its
 * raw bytes in hex in "path_hex". Returns 0 or -ENOMEM. */
int ws_diff_to_json(const WsChange *changes, size_t n, json_t **ret);

/* Writes a unified diff of the regular files among @changes (as returned
 * by ws_diff() for the same layers and folder) to @out_fd, by running
 * /usr/bin/diff -u (fork and exec, no shell) with the labels a/PATH and
 * b/PATH (/dev/null for the side that does not exist) and the paths
 * escaped. A file with a NUL byte in its first 8 KiB on either side gives
 * "Binary files a/PATH and b/PATH differ" instead. Each file's part starts
 * with git's extended header: "diff --git a/PATH b/PATH", then "new file
 * mode M", "deleted file mode M", or "old mode M" and "new mode M" when
 * its permission bits changed (M as git writes it: "100644"; setuid and
 * setgid left out, as ws_diff() leaves them). A directory whose bits
 * changed gets the header and the mode lines ("040755"); other
 * directories and symlinks are left to ws_diff_print_stat(). Returns 0 or -errno with @reterr
 * naming the path (-ESTALE when a file changed since ws_diff(), -EIO when
 * diff failed). */
int ws_diff_write_patch(const int *layer_dirfds, size_t n_layers, int host_dirfd,
                        const WsChange *changes, size_t n, int out_fd, HutchError *reterr);

/* ---- apply ---- */

typedef struct WsApplyResult {
        /* Selected paths whose host entry differs from the manifest (type,
         * permission bits, size or mtime; size and mtime not for a
         * directory, whose changed contents are checked one by one) or
         * appeared or disappeared since it was written. Sorted; a strv. */
        char **conflicts;
        size_t n_applied; /* changes written into the host folder */
        /* Without WS_APPLY_MODES: one line per entry written with a safer
         * mode than the sandbox's, "'PATH': mode 0777 kept as 0755"
         * (the path escaped, ws_path_escape()), in the order written. */
        char **modes_kept;
} WsApplyResult;

typedef enum WsApplyFlags {
        WS_APPLY_FORCE = 1 << 0, /* overwrite conflicts, or apply without a manifest */
        /* Write the sandbox's permission bits as they are (never setuid or
         * setgid). Without it, group and other write and the sticky bit are
         * written only where the host's entry already had them. */
        WS_APPLY_MODES = 1 << 1,
} WsApplyFlags;

/* Frees the contents of @r and zeroes it. */
void ws_apply_result_done(WsApplyResult *r);

/* Writes the changes of ws_diff(@layer_dirfds, @n_layers, @host_dirfd) into
 * the host folder. @paths (NULL for all) limits them to the changes at or
 * below these paths (ws_path_is_valid(), matched by whole components);
 * the changes of the directories to create on the way are selected too.
 *
 * First, every selected path is checked against @manifest. If any
 * conflicts and not WS_APPLY_FORCE, nothing is changed and -EEXIST is
 * returned with @reterr naming the first path; @result->conflicts has them
 * all (with WS_APPLY_FORCE they are listed too, and overwritten).
 * @manifest may be NULL only with WS_APPLY_FORCE.
 *
 * Then deletions (directories recursively, contents first), then
 * additions and modifications in path order: a regular file is written to a
 * temporary name in its directory and renamed over the old entry (its
 * mtime kept, and its mode as below); a symlink is recreated the same way;
 * a directory is created, and its mode set after its contents are written.
 *
 * SECURITY: modes (issue 26 item 3). setuid and setgid are never written.
 * Without WS_APPLY_MODES, a sandbox cannot make a file or directory of the
 * user's group- or world-writable or sticky: those bits are written only
 * where the host's entry (the one replaced) already had them, and every
 * entry written with fewer bits than the sandbox's is listed in
 * @result->modes_kept. Other bits (the owner's, read and execute) are
 * applied as they are.
 *
 * @result is zeroed on entry and filled as this goes, on failure too;
 * release it with ws_apply_result_done(). The manifest describes the host
 * before the apply: a caller that keeps the sandbox writes a new one.
 * Returns 0 or -errno: -EINVAL for a bad path or a NULL @manifest without
 * WS_APPLY_FORCE, -ENOENT when a path in @paths selects no change, -EEXIST on a
 * conflict (or for an entry that appeared in the way during the apply),
 * -ESTALE when a layer entry changed since the diff, -ELOOP, -ENOTDIR or
 * -EXDEV when a symlink in the host folder is in the way of a path. */
int ws_apply(const int *layer_dirfds, size_t n_layers, int host_dirfd, const WsManifest *manifest,
             const char *const *paths, WsApplyFlags flags, WsApplyResult *result,
             HutchError *reterr);
