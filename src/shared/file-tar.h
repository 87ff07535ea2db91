/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A directory tree as a tar stream, both ways, for the file builtin's
 * "pack" and "unpack" actions (src/shared/file-op.h): GET and PUT
 * .../files/archive of `hutch serve` (docs/api.md), hutch_file_archive_get()
 * and hutch_file_archive_put() of include/hutch.h.
 *
 * This is a small tar of its own rather than libarchive (which the
 * snapshot archive, store/archive.h, and the image store use) because it
 * runs where the builtin runs: in a process of the sandbox on the
 * namespace backend, and in the microVM's static hutch-agent, which links
 * no libarchive. So the archive a client sends is parsed by a process with
 * the sandbox's own confinement, never by a host process.
 *
 * Written (pack): POSIX ustar headers, with a pax extended header ('x')
 * for a path or link target longer than a ustar field; directories (name
 * ending in '/'), regular files and symlinks (as symlinks, never
 * followed), with their permission bits and mtimes (seconds), uid and gid
 * 0; each directory before what it holds, names in strcmp() order. Other
 * types (fifos, sockets, devices) are left out; hard links are written as
 * independent files.
 *
 * Read (unpack): ustar, pax ('x' per entry: path, linkpath, size, mtime;
 * 'g' ignored) and GNU ('L', 'K' long names) headers; regular files,
 * directories, symlinks and hard links. SECURITY, each refused with a
 * message naming the entry:
 *   - an absolute path or a ".." component (-EPERM);
 *   - anything through a symlink: every directory on the way is opened
 *     with O_NOFOLLOW from the one before ("a symlink then a file through
 *     it" is -ELOOP); a file replaces an existing entry by rename(), never
 *     writing through it;
 *   - a symlink whose relative target climbs above the directory
 *     extracted into, or whose absolute target climbs above the
 *     sandbox's "/" ("/../x"), lexically (-EPERM): the rule of the
 *     snapshot archive (store/archive.h); an absolute target names the
 *     sandbox's own path, as a venv's python3 -> /usr/bin/python3 does,
 *     and nothing here ever follows a symlink;
 *   - a hard link whose target is absolute, has a ".." component, or is
 *     not a regular file already below the directory (-EPERM);
 *   - device nodes and fifos (-EPERM); other entry types (-EINVAL);
 *   - past the caps: more than FILE_TAR_ENTRIES_MAX entries (-E2BIG), more
 *     file data in all than the caller's limit (-EFBIG, checked against
 *     each entry's declared size before a byte is written), a pax header
 *     over FILE_TAR_PAX_MAX, a path of PATH_MAX or more (-ENAMETOOLONG);
 *   - a bad header checksum, a bad number or a truncated stream (-EBADMSG).
 * Set-user-id and set-group-id bits are dropped (the sticky bit is kept);
 * owners are not restored (everything belongs to the sandbox's user).
 * Directory modes and mtimes are applied at the end, so read-only
 * directories can be filled. Entries extracted before a failure stay. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries of one archive, both ways (FILE_OP_LIST_MAX). */
#define FILE_TAR_ENTRIES_MAX 100000U
/* A pax extended header's data. */
#define FILE_TAR_PAX_MAX (64U << 10)
/* What a failure's message holds at most (unpack). */
#define FILE_TAR_MSG_MAX 256U

/* Writes the tree of directory @name in @dirfd (NULL: @dirfd itself) as a
 * tar stream to @out_fd, at most @max bytes of it (-EFBIG beyond), at most
 * FILE_OP_WALK_DEPTH_MAX levels deep (-ELOOP beyond) and
 * FILE_TAR_ENTRIES_MAX entries (-E2BIG). -ELOOP for a symlink as @name,
 * -ENOTDIR for another non-directory. */
int file_tar_pack(int dirfd, const char *name, uint64_t max, int out_fd);

/* Extracts the tar stream read from @in_fd into directory @name of
 * @dirfd (NULL: @dirfd itself), made (0755, with its missing parents
 * already made by the caller) when missing and @create is set, with at
 * most @max bytes of file data in all. On failure, returns -errno, reads
 * @in_fd to its end and then writes a one-line message of at most
 * FILE_TAR_MSG_MAX bytes to @out_fd ("entry '../x': a '..' component"):
 * the builtin's stdin and stdout are one file (src/shared/file-op.h), so the
 * message lands right after the archive, where hutch_file_archive_put()
 * looks for it. */
int file_tar_unpack(int dirfd, const char *name, bool create, uint64_t max, int in_fd, int out_fd);
