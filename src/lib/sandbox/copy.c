/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/copy.h"

static int copy_fail(HutchError *reterr, int r, const char *what, const char *name) {
        return hutch_error_set(reterr, -r, "failed to %s '%s' while copying the workspace: %s",
                               what, name, strerror(-r));
}

static int copy_data(int from, int to) {
        char buf[65536];

        for (;;) {
                ssize_t n = copy_file_range(from, NULL, to, NULL, SIZE_MAX >> 2, 0);

                if (n == 0)
                        return 0;
                if (n > 0)
                        continue;
                if (errno == EINTR)
                        continue;
                if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
                        return negative_errno();
                break;
        }
        for (;;) {
                ssize_t n = read(from, buf, sizeof(buf));
                int r;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return 0;
                r = loop_write(to, buf, (size_t)n);
                if (r < 0)
                        return r;
        }
}

static int copy_regular(int src_dirfd, int dst_dirfd, const char *name, const struct stat *st,
                        HutchError *reterr) {
        _cleanup_close_ int from = -EBADF, to = -EBADF;
        struct timespec times[2] = {st->st_atim, st->st_mtim};
        struct stat opened;
        int flags, r;

        /* SECURITY: O_NONBLOCK and the check below: the entry may have been
         * swapped (for a FIFO that would block init forever, say) since it
         * was inspected; only the same regular file is copied. */
        from = openat(src_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (from < 0)
                return copy_fail(reterr, negative_errno(), "open", name);
        if (fstat(from, &opened) < 0)
                return copy_fail(reterr, negative_errno(), "inspect", name);
        if (!S_ISREG(opened.st_mode) || opened.st_dev != st->st_dev || opened.st_ino != st->st_ino)
                return copy_fail(reterr, -ESTALE, "copy (it changed while being copied)", name);
        flags = fcntl(from, F_GETFL);
        if (flags < 0 || fcntl(from, F_SETFL, flags & ~O_NONBLOCK) < 0)
                return copy_fail(reterr, negative_errno(), "open", name);
        to = openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    st->st_mode & 0777);
        if (to < 0)
                return copy_fail(reterr, negative_errno(), "create", name);
        r = copy_data(from, to);
        if (r < 0)
                return copy_fail(reterr, r, "copy", name);
        /* Keep the mode exactly (umask must not narrow it), minus setuid/setgid. */
        if (fchmod(to, st->st_mode & 01777) < 0)
                return copy_fail(reterr, negative_errno(), "chmod", name);
        (void)futimens(to, times);
        return 0;
}

static int copy_dir_at(int src_dirfd, int dst_dirfd, unsigned depth, HutchError *reterr) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int dup_fd, r;

        if (depth > COPY_MAX_DEPTH)
                return hutch_error_set(reterr, ELOOP,
                                       "workspace is nested deeper than %d directories",
                                       COPY_MAX_DEPTH);
        dup_fd = fcntl(src_dirfd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0)
                return copy_fail(reterr, negative_errno(), "read", ".");
        d = fdopendir(dup_fd);
        if (!d) {
                r = negative_errno();
                (void)close(dup_fd);
                return copy_fail(reterr, r, "read", ".");
        }

        while ((errno = 0, de = readdir(d))) {
                const char *name = de->d_name;
                struct stat st;

                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                        continue;
                if (fstatat(src_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return copy_fail(reterr, negative_errno(), "inspect", name);

                if (S_ISREG(st.st_mode)) {
                        r = copy_regular(src_dirfd, dst_dirfd, name, &st, reterr);
                        if (r < 0)
                                return r;
                } else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int s = -EBADF, t = -EBADF;
                        struct timespec times[2] = {st.st_atim, st.st_mtim};

                        if (mkdirat(dst_dirfd, name, 0700) < 0)
                                return copy_fail(reterr, negative_errno(), "create", name);
                        s = openat(src_dirfd, name,
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (s < 0)
                                return copy_fail(reterr, negative_errno(), "open", name);
                        t = openat(dst_dirfd, name,
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (t < 0)
                                return copy_fail(reterr, negative_errno(), "open", name);
                        r = copy_dir_at(s, t, depth + 1, reterr);
                        if (r < 0)
                                return r;
                        if (fchmod(t, st.st_mode & 01777) < 0)
                                return copy_fail(reterr, negative_errno(), "chmod", name);
                        (void)futimens(t, times);
                } else if (S_ISLNK(st.st_mode)) {
                        char target[4096];
                        ssize_t n = readlinkat(src_dirfd, name, target, sizeof(target) - 1);

                        if (n < 0)
                                return copy_fail(reterr, negative_errno(), "read symlink", name);
                        target[n] = '\0';
                        if (symlinkat(target, dst_dirfd, name) < 0)
                                return copy_fail(reterr, negative_errno(), "create symlink", name);
                } else if (S_ISFIFO(st.st_mode)) {
                        if (mkfifoat(dst_dirfd, name, st.st_mode & 0777) < 0)
                                return copy_fail(reterr, negative_errno(), "create fifo", name);
                }
                /* Device nodes and sockets are not copied: they cannot be
                 * created in the sandbox and carry no data. */
        }
        if (errno != 0)
                return copy_fail(reterr, negative_errno(), "read", ".");
        return 0;
}

int copy_tree(int src_dirfd, int dst_dirfd, HutchError *reterr) {
        return copy_dir_at(src_dirfd, dst_dirfd, 0, reterr);
}
