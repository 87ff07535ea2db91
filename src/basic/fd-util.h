/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* File descriptor and path helpers. All return -errno on failure. */

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* Sends @data of @len bytes plus the @n_fds descriptors in @fds (may be 0)
 * as one message over the SOCK_SEQPACKET socket @sock. */
int send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds);

/* Receives one message of at most @len bytes into @data and up to @max_fds
 * descriptors (born CLOEXEC; unused slots set to -EBADF). Returns the byte
 * count (0 on EOF). A message that was cut short (MSG_TRUNC or MSG_CTRUNC)
 * is -EMSGSIZE, and any fds it carried are closed. */
ssize_t recv_with_fds(int sock, void *data, size_t len, int *fds, size_t max_fds);

/* Returns true if @path is absolute and has no "." or ".." component
 * (repeated or trailing slashes are tolerated). Purely lexical. */
bool path_is_safe_absolute(const char *path);
