/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* File descriptor and path helpers. All return -errno on failure. */

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "hutch-error.h"
#include "macro.h"

static inline void closedirp(DIR **d) {
        if (*d)
                (void)closedir(*d);
        *d = NULL;
}

/* Writes all of @buf, retrying on EINTR and short writes. */
int loop_write(int fd, const void *buf, size_t len);
/* Reads up to @len bytes, retrying on EINTR, until @len or EOF; returns the
 * count read. */
ssize_t loop_read(int fd, void *buf, size_t len);

/* Reads @fd until EOF into @buf (at most @size bytes), waiting at most
 * @timeout_ms in all. Returns the count read at EOF, -ETIMEDOUT when the
 * time ran out, -EFBIG when @buf filled up before EOF, or -errno. */
ssize_t read_until_eof(int fd, void *buf, size_t size, uint64_t timeout_ms);

/* Writes @s to the file at @path (O_WRONLY|O_CLOEXEC, no O_CREAT), as one
 * write(2): the /proc files this is for want the whole value at once. */
int write_string_file(const char *path, const char *s);

/* Reads a whole small file (at most @max bytes, else -EFBIG) into a
 * NUL-terminated string. */
int read_full_file(const char *path, size_t max, char **ret);

/* The same, relative to @dirfd, with extra open(2) @flags (O_NOFOLLOW). */
int read_full_file_at(int dirfd, const char *path, int flags, size_t max, char **ret);

/* The same from an open @fd (read from its current offset). The data may
 * hold NUL bytes: its length (without the terminator) goes to @ret_size
 * when non-NULL. */
int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size);

/* Opens a DIR stream of its own (a new open of ".", so its own offset)
 * over the directory @dirfd, which stays the caller's and may be O_PATH. */
int opendir_fd(int dirfd, DIR **ret);

/* readdir() without "." and "..". NULL at the end with errno 0, or on
 * failure with errno set. */
struct dirent *readdir_no_dot(DIR *d);

/* Opens @name in @dirfd read-only (O_NOFOLLOW, never blocking on a FIFO)
 * and checks it is still the regular file @expected (from fstatat) names:
 * same st_dev and st_ino. Returns the fd (O_NONBLOCK cleared), -ESTALE when
 * the entry was swapped for something else, or -errno. */
int open_regular_at(int dirfd, const char *name, const struct stat *expected);

/* The same for the directory @name (O_DIRECTORY | O_NOFOLLOW). */
int open_directory_at(int dirfd, const char *name, const struct stat *expected);

/* openat2() of the relative @path under @dirfd with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: no component may be a symlink
 * (the last included) and ".." may not climb above @dirfd. O_CLOEXEC is
 * added to @flags; @mode is used with O_CREAT. Returns the fd or -errno
 * (-ELOOP for a symlink, -EXDEV for an escape). */
int openat_beneath(int dirfd, const char *path, int flags, mode_t mode);

/* A new file description (O_CLOEXEC, O_NOCTTY, O_NONBLOCK, opened with
 * @access: O_RDONLY or O_WRONLY) of the pipe, FIFO or terminal @fd, so
 * that I/O on it never blocks, whatever is done with @fd's own (a
 * caller's stdio is blocking, and shared). -EOPNOTSUPP for anything else
 * (a regular file or a socket, which have other ways; a device, whose open
 * may have effects); -ENXIO for the write end of a named FIFO nobody
 * reads. */
int fd_reopen_nonblocking(int fd, int access);

/* The most descriptors one message of send_with_fds() carries: hutch's own
 * cap (the kernel's, SCM_MAX_FD, is 253), which sizes the control buffers
 * on the stack. More travel in batches (send_fds_batched()). */
#define FD_MESSAGE_MAX 64

/* Sends @data of @len bytes plus the @n_fds descriptors in @fds (may be 0,
 * at most FD_MESSAGE_MAX, else -E2BIG) as one message over the
 * SOCK_SEQPACKET socket @sock. */
int send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds);

/* Sends the @n_fds descriptors of @fds (any number) over @sock in messages
 * of FD_MESSAGE_MAX each (the last one the rest), each with the one byte
 * "F"; none when @n_fds is 0. The receiver knows @n_fds from a message of
 * its own before (an image's layer count). 0 or -errno. */
int send_fds_batched(int sock, const int *fds, size_t n_fds);

/* Receives what send_fds_batched() sent: exactly @n_fds descriptors (born
 * CLOEXEC) into @fds. Returns 0; -EBADMSG for a message that is not a
 * batch or carries another count than it should, -EPIPE on EOF, or -errno;
 * then every descriptor received is closed and @fds is all -EBADF. */
int recv_fds_batched(int sock, int *fds, size_t n_fds);

/* Receives one message of at most @len bytes into @data and up to @max_fds
 * descriptors (born CLOEXEC; unused slots set to -EBADF). Returns the byte
 * count (0 on EOF). A message that was cut short (MSG_TRUNC or MSG_CTRUNC)
 * is -EMSGSIZE, and any fds it carried are closed. */
ssize_t recv_with_fds(int sock, void *data, size_t len, int *fds, size_t max_fds);

/* Returns true if @path is absolute and has no "." or ".." component
 * (repeated or trailing slashes are tolerated). Purely lexical. */
bool path_is_safe_absolute(const char *path);

/* Makes @path (and missing parents, 0755) with mode 0700, and checks
 * that what is there is a directory owned by us (-EPERM otherwise) that
 * no group or other user can write (-EACCES otherwise). SECURITY: a
 * folder planted by someone else, or left writable to others, is never
 * used (docs/threat-model.md). */
int mkdir_private(const char *path);

/* Fills @reterr for mkdir_private(@path) that failed with @r: "cannot use
 * the WHAT PATH: ...", with the owner and mode of what is there when it is
 * not private. Returns @r. */
int mkdir_private_error(const char *what, const char *path, int r, HutchError *reterr);

/* Finds a binary that ships with hutch: $@env_name when set (-EACCES when
 * it fails access(2) with @mode), else $libexecdir/hutch/@name relative to
 * the running binary, else @name next to it, else ../@build_subdir/@name
 * (the build tree), else @installed when not NULL (where `meson install`
 * put it: for a program using libhutch, which is not next to hutch).
 * Returns 0 and a new path, or -ENOENT. */
int shipped_binary_find(const char *env_name, const char *name, const char *build_subdir, int mode,
                        const char *installed, char **ret);

/* Writes @len bytes of @data as @dir/@name atomically: a temporary name in
 * @dir (with the pid: concurrent writers do not meet), fsync, rename, then
 * an fsync of @dir. A reader sees the old file or the whole new one.
 * Returns 0 or -errno (the temporary file is removed). */
int write_file_atomic(const char *dir, const char *name, const void *data, size_t len);
/* The same without either fsync: a reader sees the old file or the whole
 * new one, but after a power loss the old one may be what is on disk.
 * Only for a file whose older content is as good after a crash (issue
 * 20: the E2B table's state changes its server's start undoes anyway). */
int write_file_replace(const char *dir, const char *name, const void *data, size_t len);
