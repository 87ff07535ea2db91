/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "fd-util.h"
#include "time-util.h"

int loop_write(int fd, const void *buf, size_t len) {
        const char *p = buf;

        while (len > 0) {
                ssize_t n = write(fd, p, len);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

ssize_t loop_read(int fd, void *buf, size_t len) {
        char *p = buf;
        size_t done = 0;

        while (done < len) {
                ssize_t n = read(fd, p + done, len - done);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                done += (size_t)n;
        }
        return (ssize_t)done;
}

ssize_t read_until_eof(int fd, void *buf, size_t size, uint64_t timeout_ms) {
        uint64_t deadline = time_monotonic_ms() + timeout_ms;
        char *p = buf;
        size_t len = 0;

        for (;;) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                uint64_t now = time_monotonic_ms();
                ssize_t n;
                int k;

                if (len >= size)
                        return -EFBIG;
                if (now >= deadline)
                        return -ETIMEDOUT;
                k = poll(&pfd, 1, (int)MIN(deadline - now, (uint64_t)INT32_MAX));
                if (k < 0 && errno != EINTR)
                        return negative_errno();
                if (k <= 0)
                        continue;
                n = read(fd, p + len, size - len);
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return (ssize_t)len;
                len += (size_t)n;
        }
}

int write_string_file(const char *path, const char *s) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(s);
        ssize_t n;

        fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        n = write(fd, s, len);
        if (n < 0)
                return negative_errno();
        if ((size_t)n != len)
                return -EIO;
        return 0;
}

int read_full_file(const char *path, size_t max, char **ret) {
        return read_full_file_at(AT_FDCWD, path, 0, max, ret);
}

int read_full_file_at(int dirfd, const char *path, int flags, size_t max, char **ret) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | flags);
        if (fd < 0)
                return negative_errno();
        return read_full_fd(fd, max, ret, NULL);
}

int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 4096;

        buf = malloc(alloc);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;

                if (size + 1 >= alloc) {
                        char *c;

                        if (alloc > max + 1)
                                return -EFBIG;
                        alloc *= 2;
                        c = realloc(buf, alloc);
                        if (!c)
                                return -ENOMEM;
                        buf = c;
                }
                n = read(fd, buf + size, alloc - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                size += (size_t)n;
                if (size > max)
                        return -EFBIG;
        }
        buf[size] = '\0';
        if (ret_size)
                *ret_size = size;
        *ret = TAKE_PTR(buf);
        return 0;
}

int opendir_fd(int dirfd, DIR **ret) {
        /* A new open of the same directory, not a dup: its own offset,
         * from the first entry, and @dirfd may be an O_PATH fd. */
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;

        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                int r = negative_errno();

                (void)close(fd);
                return r;
        }
        *ret = d;
        return 0;
}

struct dirent *readdir_no_dot(DIR *d) {
        for (;;) {
                struct dirent *de;

                errno = 0;
                de = readdir(d);
                if (!de || (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0))
                        return de;
        }
}

int open_regular_at(int dirfd, const char *name, const struct stat *expected) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int flags;

        /* SECURITY: O_NONBLOCK and the check below: the entry may have been
         * swapped since @expected was taken (for a FIFO that would block the
         * open forever, say); only the same regular file is accepted. */
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_dev != expected->st_dev || st.st_ino != expected->st_ino)
                return -ESTALE;
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

int open_directory_at(int dirfd, const char *name, const struct stat *expected) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (st.st_dev != expected->st_dev || st.st_ino != expected->st_ino)
                return -ESTALE;
        return TAKE_FD(fd);
}

int openat_beneath(int dirfd, const char *path, int flags, mode_t mode) {
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        long fd;

        do
                fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        while (fd < 0 && errno == EINTR);
        if (fd < 0)
                return negative_errno();
        return (int)fd;
}

int fd_reopen_nonblocking(int fd, int access) {
        char path[64];
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISFIFO(st.st_mode) && !(S_ISCHR(st.st_mode) && isatty(fd)))
                return -EOPNOTSUPP;
        (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        r = open(path, access | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        return r < 0 ? negative_errno() : r;
}

int send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * FD_MESSAGE_MAX)];
        } control = {};
        struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n;

        if (n_fds > FD_MESSAGE_MAX)
                return -E2BIG;
        if (n_fds > 0) {
                struct cmsghdr *cmsg;

                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                cmsg = CMSG_FIRSTHDR(&mh);
                cmsg->cmsg_level = SOL_SOCKET;
                cmsg->cmsg_type = SCM_RIGHTS;
                cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
        }
        do
                n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        if ((size_t)n != len)
                return -EIO;
        return 0;
}

ssize_t recv_with_fds(int sock, void *data, size_t len, int *fds, size_t max_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * FD_MESSAGE_MAX)];
        } control = {};
        struct iovec iov = {.iov_base = data, .iov_len = len};
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof(control.buf),
        };
        size_t got = 0;
        ssize_t n;

        for (size_t i = 0; i < max_fds; i++)
                fds[i] = -EBADF;
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();

        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                size_t k;
                int *in;

                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                in = (int *)(void *)CMSG_DATA(c);
                for (size_t i = 0; i < k; i++) {
                        int fd;

                        memcpy(&fd, in + i, sizeof(int));
                        if (got < max_fds)
                                fds[got++] = fd;
                        else
                                (void)safe_close(fd); /* more than the caller wants */
                }
        }
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                for (size_t i = 0; i < got; i++)
                        fds[i] = safe_close(fds[i]);
                return -EMSGSIZE;
        }
        return n;
}

int send_fds_batched(int sock, const int *fds, size_t n_fds) {
        for (size_t i = 0; i < n_fds; i += FD_MESSAGE_MAX) {
                int r = send_with_fds(sock, "F", 1, fds + i,
                                      MIN(n_fds - i, (size_t)FD_MESSAGE_MAX));

                if (r < 0)
                        return r;
        }
        return 0;
}

int recv_fds_batched(int sock, int *fds, size_t n_fds) {
        size_t got = 0;
        int r = 0;

        for (size_t i = 0; i < n_fds; i++)
                fds[i] = -EBADF;
        while (got < n_fds) {
                size_t want = MIN(n_fds - got, (size_t)FD_MESSAGE_MAX), k = 0;
                int batch[FD_MESSAGE_MAX];
                char tag = 0;
                ssize_t n;

                n = recv_with_fds(sock, &tag, 1, batch, FD_MESSAGE_MAX);
                while (n >= 0 && k < FD_MESSAGE_MAX && batch[k] >= 0)
                        k++;
                if (n != 1 || tag != 'F' || k != want) {
                        for (size_t i = 0; i < k; i++)
                                batch[i] = safe_close(batch[i]);
                        /* A longer message than "F" is not a batch either. */
                        r = n == -EMSGSIZE ? -EBADMSG : n < 0 ? (int)n : n == 0 ? -EPIPE : -EBADMSG;
                        break;
                }
                memcpy(fds + got, batch, want * sizeof(int));
                got += want;
        }
        if (r < 0)
                for (size_t i = 0; i < got; i++)
                        fds[i] = safe_close(fds[i]);
        return r;
}

bool path_is_safe_absolute(const char *path) {
        const char *p;

        if (!path || path[0] != '/')
                return false;
        p = path;
        while (*p) {
                size_t n;

                while (*p == '/')
                        p++;
                n = strcspn(p, "/");
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += n;
        }
        return true;
}

/* Whether @st is a directory that only we can change: ours, and neither
 * group- nor other-writable (SECURITY: a folder another user made first,
 * or one left 0777, could be filled or emptied under us). */
static int private_dir_check(const struct stat *st) {
        if (!S_ISDIR(st->st_mode) || st->st_uid != geteuid())
                return -EPERM;
        if (st->st_mode & (S_IWGRP | S_IWOTH))
                return -EACCES;
        return 0;
}

/* Makes @path (and missing parents) mode 0700, and checks that what is
 * there is a private directory of ours. */
int mkdir_private(const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        struct stat st;

        if (!copy)
                return -ENOMEM;
        /* Usually it is there already: one lstat instead of a mkdir per
         * component (every `hutch exec` opens the store). */
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
                return private_dir_check(&st);
        for (char *p = copy + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        if (mkdir(copy, 0755) < 0 && errno != EEXIST)
                                return negative_errno();
                        *p = '/';
                }
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        if (lstat(path, &st) < 0)
                return negative_errno();
        /* SECURITY: someone else's folder (a planted /tmp/hutch-<uid>)
         * must not hold our sockets and layers. */
        return private_dir_check(&st);
}

int mkdir_private_error(const char *what, const char *path, int r, HutchError *reterr) {
        struct stat st;

        if ((r == -EPERM || r == -EACCES) && lstat(path, &st) == 0)
                return hutch_error_set(
                        reterr, -r,
                        "cannot use the %s %s: it is %s, owned by uid %u, mode "
                        "%04o (it must be a directory of uid %u that no other "
                        "user can write)",
                        what, path, S_ISDIR(st.st_mode) ? "a directory" : "no directory",
                        (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return hutch_error_set(reterr, -r, "cannot use the %s %s: %s", what, path, strerror(-r));
}

int shipped_binary_find(const char *env_name, const char *name, const char *build_subdir, int mode,
                        const char *installed, char **ret) {
        const char *env = getenv(env_name);
        char self[PATH_MAX], cand[PATH_MAX + 128];
        ssize_t n;
        char *dir;

        if (env && env[0]) {
                if (access(env, mode) < 0)
                        return -EACCES;
                *ret = strdup(env);
                return *ret ? 0 : -ENOMEM;
        }
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
                return negative_errno();
        self[n] = '\0';
        dir = dirname(self);
        /* Installed: $libexecdir/hutch/NAME beside $bindir/hutch; else next
         * to hutch; else the build tree's src/BUILD_SUBDIR. */
        (void)snprintf(cand, sizeof(cand), "%s/../libexec/hutch/%s", dir, name);
        if (access(cand, mode) < 0)
                (void)snprintf(cand, sizeof(cand), "%s/%s", dir, name);
        if (access(cand, mode) < 0)
                (void)snprintf(cand, sizeof(cand), "%s/../%s/%s", dir, build_subdir, name);
        if (access(cand, mode) < 0) {
                if (!installed || access(installed, mode) < 0)
                        return -ENOENT;
                *ret = strdup(installed);
                return *ret ? 0 : -ENOMEM;
        }
        *ret = realpath(cand, NULL);
        return *ret ? 0 : negative_errno();
}

static int write_file_rename(const char *dir, const char *name, const void *data, size_t len,
                             bool durable) {
        _cleanup_free_ char *tmp = NULL, *path = NULL;
        _cleanup_close_ int fd = -EBADF, dfd = -EBADF;
        int r;

        if (asprintf(&tmp, "%s/.%s.tmp-%d", dir, name, (int)getpid()) < 0) {
                tmp = NULL;
                return -ENOMEM;
        }
        if (asprintf(&path, "%s/%s", dir, name) < 0) {
                path = NULL;
                return -ENOMEM;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, data, len);
        if (r >= 0 && durable && fsync(fd) < 0)
                r = negative_errno();
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0) {
                (void)unlink(tmp);
                return r;
        }
        if (!durable)
                return 0;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void)fsync(dfd);
        return 0;
}

int write_file_atomic(const char *dir, const char *name, const void *data, size_t len) {
        return write_file_rename(dir, name, data, len, true);
}

int write_file_replace(const char *dir, const char *name, const void *data, size_t len) {
        return write_file_rename(dir, name, data, len, false);
}
