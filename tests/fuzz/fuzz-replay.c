/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "macro.h"

/* Replays every file of the corpus directories (or files) named on the
 * command line through a fuzz target's LLVMFuzzerTestOneInput(), so the
 * corpus runs in the normal test suite (`meson test --suite fuzz-regress`)
 * without libFuzzer. A crash or sanitizer report fails the test; an empty
 * corpus fails it too, because then nothing was tested. */

#define REPLAY_INPUT_MAX (1U << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(int dirfd, const char *name, size_t *count) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ uint8_t *buf = NULL;
        struct stat st;
        ssize_t n;

        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return 0;
        if (st.st_size > REPLAY_INPUT_MAX)
                return -EFBIG;
        /* One spare byte so an empty file still gets a valid pointer. */
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        n = loop_read(fd, buf, (size_t)st.st_size);
        if (n < 0)
                return (int)n;
        (void)LLVMFuzzerTestOneInput(buf, (size_t)n);
        (*count)++;
        return 0;
}

static int replay_path(const char *path, size_t *count) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        struct stat st;
        int r;

        if (stat(path, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return replay_file(AT_FDCWD, path, count);
        d = opendir(path);
        if (!d)
                return negative_errno();
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                r = replay_file(dirfd(d), de->d_name, count);
                if (r < 0) {
                        fprintf(stderr, "fuzz-replay: %s/%s: %s\n", path, de->d_name, strerror(-r));
                        return r;
                }
        }
        return 0;
}

int main(int argc, char *argv[]) {
        size_t count = 0;
        int r;

        for (int i = 1; i < argc; i++) {
                r = replay_path(argv[i], &count);
                if (r < 0) {
                        fprintf(stderr, "fuzz-replay: %s: %s\n", argv[i], strerror(-r));
                        return EXIT_FAILURE;
                }
        }
        if (count == 0) {
                fprintf(stderr, "fuzz-replay: no inputs found\n");
                return EXIT_FAILURE;
        }
        printf("fuzz-replay: %zu inputs replayed without a crash\n", count);
        return EXIT_SUCCESS;
}
