/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/cgroup-internal.h"
#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"

int cg_open_dir(const char *path) {
        int fd;

        if (!path)
                return -EINVAL;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        return fd;
}

int cg_write_at(int dfd, const char *file, const char *value) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(value);
        ssize_t n;

        fd = openat(dfd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        /* cgroup files take a value in one write; a short write would
         * leave half a value, so it is an error rather than a retry. */
        n = write(fd, value, len);
        if (n < 0)
                return negative_errno();
        if ((size_t)n != len)
                return -EIO;
        return 0;
}

int cg_write(const char *dir, const char *file, const char *value) {
        _cleanup_close_ int dfd = -EBADF;

        dfd = cg_open_dir(dir);
        if (dfd < 0)
                return dfd;
        return cg_write_at(dfd, file, value);
}

int cg_read(const char *dir, const char *file, char **ret) {
        _cleanup_close_ int dfd = -EBADF;

        dfd = cg_open_dir(dir);
        if (dfd < 0)
                return dfd;
        return read_full_file_at(dfd, file, O_NOFOLLOW, CG_FILE_MAX, ret);
}

int cg_keyed_value(const char *text, const char *key, uint64_t *ret) {
        size_t klen = strlen(key);

        for (const char *p = text; p && *p;) {
                size_t n = strcspn(p, "\n");

                if (n > klen && strncmp(p, key, klen) == 0 && p[klen] == ' ') {
                        char buf[32];
                        size_t vlen = n - klen - 1;

                        if (vlen == 0 || vlen >= sizeof(buf))
                                return -EBADMSG;
                        memcpy(buf, p + klen + 1, vlen);
                        buf[vlen] = '\0';
                        return safe_atou64(buf, ret) < 0 ? -EBADMSG : 0;
                }
                p += n;
                if (*p == '\n')
                        p++;
        }
        return -ENOENT;
}

bool cg_word_in_list(const char *list, const char *word, const char *sep) {
        size_t wlen = strlen(word);

        if (!list)
                return false;
        for (const char *p = list; *p;) {
                size_t n = strcspn(p, sep);

                if (n == wlen && strncmp(p, word, n) == 0)
                        return true;
                p += n;
                if (*p)
                        p++;
        }
        return false;
}

bool cg_writable(const char *dir, const char *file) {
        _cleanup_close_ int dfd = -EBADF;

        if (!dir)
                return false;
        if (!file)
                return faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) >= 0;
        dfd = cg_open_dir(dir);
        if (dfd < 0)
                return false;
        return faccessat(dfd, file, W_OK, AT_EACCESS | AT_SYMLINK_NOFOLLOW) >= 0;
}

char *cg_path_join(const char *a, const char *b) {
        char *s = NULL;

        if (asprintf(&s, "%s/%s", a, b) < 0)
                return NULL;
        return s;
}
