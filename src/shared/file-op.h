/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* File operations inside a persistent sandbox (hutch_file_*() in
 * include/hutch.h). The keeper turns a "file" request (keeper.h) into an
 * exec request (sync.h) whose argv[0] is FILE_OP_ARGV0; the child that the
 * sandbox init forks for it runs file_op_main() instead of exec'ing. So the
 * operation is done by a process of the sandbox: in its mount namespace
 * and root, with its identity, capabilities (none), landlock rules and
 * seccomp filter, in the exec's cgroup.
 *
 *   argv  FILE_OP_ARGV0 ACTION PATH MODE MAX USER   (MODE and MAX in
 *         decimal; MODE holds the FILE_OP_* flags above the permission
 *         bits; USER, optional (an exec's argv carries no empty string),
 *         is the owner of what a write, mkdir or move creates, a --user
 *         spec resolved in the sandbox's /etc/passwd and /etc/group: see
 *         file_op_run()'s @owner)
 *   fd 0  write: the bytes to write (read to EOF); move: the destination
 *         path (read to EOF, at most PATH_MAX bytes)
 *   fd 1  read: the file's bytes; list and walk: a JSON array of entries;
 *         stat: one entry, {"name" (or "name_hex": the raw bytes in hex when
 *         the name is not UTF-8), "type": file|dir|symlink|other, "size",
 *         "mode" (permission bits), "mtime_ms"}; a walk's names are paths
 *         relative to the directory walked ("src/main.c")
 *   exit  0, or the errno of the failure
 *
 * SECURITY: the path is resolved from the sandbox's "/" (a relative one
 * from @cwd), component by component: "." and ".." are resolved lexically
 * first (".." above "/" is -EXDEV), then every directory is opened with
 * O_NOFOLLOW from the one before, so no symlink is ever followed, magic
 * links (/proc/N/root, /proc/self/fd/N) included: a symlink in the way, or
 * as the last component of a read, write or list, is -ELOOP. openat2() is
 * not available (the seccomp filter makes it ENOSYS). Whatever the path
 * says, the process is inside the sandbox's mount namespace: the host's
 * files beyond the sandbox's own view are not reachable at all. */

#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* No program can be called this: a command's argv[0] from a client never
 * starts with 0x01 (the keeper refuses it). */
#define FILE_OP_ARGV0 "\001hutch-file"
#define FILE_OP_ARGV0_PREFIX '\001'
#define FILE_OP_ARGC 6
/* file_op_main()'s status when USER is not in the sandbox's /etc/passwd
 * (or /etc/group): no file operation fails with it otherwise. */
#define FILE_OP_NO_USER ESRCH

/* Flags or-ed into MODE. PARENTS: write and mkdir create the missing
 * directories of the path (0755), and mkdir of an existing directory
 * succeeds (mkdir -p). REPLACE: move replaces an existing destination
 * (not a directory); without it the destination must not exist. */
#define FILE_OP_PARENTS (1U << 16)
#define FILE_OP_REPLACE (1U << 17)
#define FILE_OP_FLAGS (FILE_OP_PARENTS | FILE_OP_REPLACE)

/* How deep a walk goes at most (MAX 0 or more: this). */
#define FILE_OP_WALK_DEPTH_MAX 64U

/* Entries of one list or walk (-E2BIG beyond). */
#define FILE_OP_LIST_MAX 100000U
/* The JSON of one list or stat, as the client reads it back. */
#define FILE_OP_JSON_MAX (64U << 20)

typedef enum FileOpAction {
        FILE_OP_READ,
        FILE_OP_WRITE,
        FILE_OP_LIST,
        FILE_OP_STAT,
        FILE_OP_REMOVE,
        FILE_OP_MKDIR,
        FILE_OP_MOVE,
        FILE_OP_WALK,
        FILE_OP_PACK,
        FILE_OP_UNPACK,
        _FILE_OP_ACTION_MAX,
        _FILE_OP_ACTION_INVALID = -EINVAL,
} FileOpAction;

/* Who owns what an operation creates (issue 20: E2B's files written "as"
 * a user). */
typedef struct FileOpOwner {
        uid_t uid;
        gid_t gid;
} FileOpOwner;

/* "read", "write", "list", "stat", "remove", "mkdir", "move", "walk",
 * "pack", "unpack";
 * NULL when out of range. */
const char *file_op_action_to_string(FileOpAction a);
FileOpAction file_op_action_from_string(const char *s);

/* Performs @action on @path below @root_fd (the sandbox's "/"; a relative
 * @path is taken from the absolute @cwd), as the top of this header says:
 *   read    a regular file of at most @max bytes to @out_fd (-EFBIG beyond,
 *           -EISDIR for a directory, -EINVAL for anything not a regular file)
 *   write   @in_fd's bytes (to EOF) to a temporary file in @path's directory,
 *           renamed over @path; an existing regular file's permission bits
 *           are kept (without set-user-id and set-group-id), else @mode
 *           (0-0777; -EINVAL beyond); -EISDIR for a directory
 *   list    the entries of directory @path to @out_fd (-ENOTDIR otherwise;
 *           -E2BIG past FILE_OP_LIST_MAX)
 *   stat    @path itself (a symlink is not followed) to @out_fd
 *   remove  a file, a symlink or an empty directory (-ENOTEMPTY otherwise)
 *   mkdir   a directory with @mode (-EEXIST if @path exists, unless
 *           FILE_OP_PARENTS and it is a directory)
 *   move    @path to the destination read from @in_fd (resolved the same
 *           way, with renameat2(); -EEXIST for an existing destination
 *           unless FILE_OP_REPLACE; -EXDEV across file systems)
 *   walk    the tree below directory @path, depth-first, at most @max
 *           levels (0 or beyond FILE_OP_WALK_DEPTH_MAX: that), symlinks
 *           listed and never followed, to @out_fd (-E2BIG past
 *           FILE_OP_LIST_MAX entries)
 *   pack    the tree below directory @path as a tar stream of at most @max
 *           bytes to @out_fd (sandbox/file-tar.h)
 *   unpack  the tar stream of @in_fd into directory @path, at most @max
 *           bytes of file data; FILE_OP_PARENTS makes @path and its
 *           missing parents; a refusal's message follows the archive on
 *           @out_fd (sandbox/file-tar.h)
 * FILE_OP_PARENTS in @mode makes write and mkdir create missing
 * directories on the way, each opened without following a symlink as
 * the path's own are.
 * @owner (NULL: none) owns what write, mkdir and move create: the written
 * file, the directory made, and the missing directories FILE_OP_PARENTS
 * makes (an existing one keeps its owner), each given with fchown() on
 * the descriptor this opened without following a symlink, never by a
 * path; -EINVAL with another action. SECURITY: the kernel takes only ids
 * of the sandbox's user namespace (an unmapped one: -EPERM here), and the
 * call needs CAP_CHOWN there (a sandbox whose only id is root: -EPERM).
 * Returns 0 or -errno: -EINVAL for an empty path or a relative @cwd,
 * -ENAMETOOLONG, -EXDEV for ".." above "/", -ELOOP for a symlink in the way,
 * -EBUSY to write or remove "/" itself, and the errors of the calls. */
int file_op_run(int root_fd, const char *cwd, FileOpAction action, const char *path, unsigned mode,
                uint64_t max, const FileOpOwner *owner, int in_fd, int out_fd);

/* The builtin's entry point in the child init forked (fds 0 and 1 set up,
 * @cwd the request's): parses @argv (FILE_OP_ARGC entries, or one less
 * without USER) and runs the
 * operation from "/". A USER is resolved with image_user_resolve() in the
 * sandbox's /etc/passwd and /etc/group, each opened below "/" without
 * following a symlink (FILE_OP_NO_USER when not found); the caller's own
 * uid and gid need no fchown(). Returns the exit status: 0 or a positive
 * errno. */
int file_op_main(const char *cwd, char *const *argv);
