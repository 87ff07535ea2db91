/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Landlock, as defence in depth under the mount tree: once the pre-exec
 * child has built and entered the sandbox's mount tree, it restricts itself
 * so that writes of any kind are only possible beneath the paths the policy
 * made writable. A bind mount that was meant to be read-only but is not
 * (a bug in the mount code, a filesystem that ignores MS_RDONLY) is then
 * still not writable.
 *
 * Raw syscalls, no library. Nothing here logs. The restriction applies to
 * the calling thread and everything it later forks or execs, and can never
 * be lifted. Already open file descriptors (stdio, pipes, sockets) are not
 * affected: Landlock checks path-based opens and directory operations.
 * Reads and execution stay allowed everywhere, as do device ioctls
 * (LANDLOCK_ACCESS_FS_IOCTL_DEV, ABI 5), the network and the scopes
 * (abstract unix sockets, signals, ABI 6): none of those is handled. */

#include <stdbool.h>
#include <stddef.h>

/* Returns the kernel's Landlock ABI version (>= 1), or -EOPNOTSUPP when
 * Landlock is not built in (ENOSYS) or disabled at boot (EOPNOTSUPP), or
 * another -errno from landlock_create_ruleset(2). */
int landlock_get_abi(void);

/* Restricts the calling process so that it can only write beneath the
 * paths in @writable (a NULL-terminated array; NULL or empty means nothing
 * is writable). "Write" is every write-type right the running ABI knows:
 * WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG,
 * MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM, plus REFER (renaming or
 * linking across directories) from ABI 2 and TRUNCATE from ABI 3. With ABI
 * 1, where REFER cannot be granted, every cross-directory rename or link
 * fails with EXDEV, even between writable directories.
 *
 * Each path is opened with O_PATH|O_CLOEXEC, following symlinks, so the
 * rule covers what the path resolves to at this moment. A directory gets
 * every handled right for its whole subtree; anything else (a regular file,
 * a character device such as /dev/null) gets only the rights that apply to
 * files: WRITE_FILE and TRUNCATE. Note that device and /proc files are
 * paths too: a command that must open /dev/null, /dev/tty or /dev/pts/N for
 * writing needs them listed.
 *
 * Requires PR_SET_NO_NEW_PRIVS set by the caller (or CAP_SYS_ADMIN in the
 * current user namespace); this function does not set it.
 *
 * Returns 0, or -EOPNOTSUPP when Landlock is unavailable (nothing is
 * restricted then: the caller decides whether that is fatal), -ENOENT (or
 * another open(2) error) for a path that cannot be opened, -EPERM when
 * neither no_new_privs nor CAP_SYS_ADMIN is present, -E2BIG when the
 * process is already nested in 16 Landlock domains, or another -errno from
 * the Landlock syscalls. On failure the process is not restricted. */
int landlock_restrict_writes(char *const *writable);

/* One place a process restricted by landlock_restrict_paths() may reach:
 * @path (opened here, following symlinks), or, with @path NULL, the
 * descriptor @fd (of any kind: O_PATH, a detached mount's root). */
typedef struct LandlockPath {
        const char *path;
        int fd;
        bool write;    /* and not only read, list and execute */
        bool optional; /* a @path that does not exist, or that the process
                        * cannot reach (it could not use it), is left out */
} LandlockPath;

/* Restricts the calling process to @paths, for files as well as for
 * writes: beneath each directory it may read files, list directories and
 * execute, and with @write every write-type right of
 * landlock_restrict_writes(); a file gets the rights that apply to files
 * (read, execute; write and truncate with @write). Anywhere else nothing
 * can be opened, listed, executed or changed by path. From ABI 6 the
 * process (and what it starts) can also signal, and connect to abstract
 * unix sockets of, only processes of its own domain. (What stays allowed:
 * what Landlock does not handle, as above, and the descriptors already
 * open.) Requires no_new_privs, as landlock_restrict_writes().
 * Returns 0, or -errno with the process not restricted (-EOPNOTSUPP
 * without Landlock; -ENOENT or -EACCES for a path that is not optional). */
int landlock_restrict_paths(const LandlockPath *paths, size_t n);
