/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "test-util.h"
#include "test.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

void tmpdir_removep(char **dir) {
        if (*dir) {
                (void)nftw(*dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
                free(*dir);
        }
}

char *make_tmpdir(void) {
        char t[] = "/tmp/hutch-test-XXXXXX";
        char *real;

        if (!mkdtemp(t))
                fail_msg("mkdtemp: %s", strerror(errno));
        real = realpath(t, NULL);
        if (!real)
                fail_msg("realpath: %s", strerror(errno));
        return real;
}

char *path_join(const char *a, const char *b) {
        char *s = NULL;

        if (asprintf(&s, "%s/%s", a, b) < 0)
                fail_msg("asprintf failed");
        return s;
}

void write_file_mode(const char *path, const void *data, size_t len, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        int r;

        if (fd < 0)
                fail_msg("create %s: %s", path, strerror(errno));
        r = loop_write(fd, data, len);
        if (r < 0)
                fail_msg("write %s: %s", path, strerror(-r));
        (void)close(fd);
}

void write_file(const char *path, const void *data, size_t len) {
        write_file_mode(path, data, len, 0644);
}

void write_text(const char *path, const char *text) {
        write_file(path, text, strlen(text));
}
