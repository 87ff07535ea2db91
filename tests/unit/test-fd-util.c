/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <unistd.h>

#include "fd-util.h"
#include "test.h"

TEST(read_until_eof_reads_to_eof) {
        char buf[16];
        int p[2];

        ASSERT_OK(pipe2(p, O_CLOEXEC));
        ASSERT_OK(loop_write(p[1], "hello", 5));
        (void)close(p[1]);
        ASSERT_EQ(read_until_eof(p[0], buf, sizeof(buf), 1000), 5);
        ASSERT_EQ(memcmp(buf, "hello", 5), 0);
        (void)close(p[0]);
}

TEST(read_until_eof_too_large) {
        char buf[4];
        int p[2];

        ASSERT_OK(pipe2(p, O_CLOEXEC));
        ASSERT_OK(loop_write(p[1], "hello", 5));
        (void)close(p[1]);
        ASSERT_ERROR(read_until_eof(p[0], buf, sizeof(buf), 1000), EFBIG);
        (void)close(p[0]);
}

TEST(read_until_eof_times_out_without_eof) {
        char buf[16];
        int p[2];

        /* The write end stays open: data but no EOF. */
        ASSERT_OK(pipe2(p, O_CLOEXEC));
        ASSERT_OK(loop_write(p[1], "x", 1));
        ASSERT_ERROR(read_until_eof(p[0], buf, sizeof(buf), 50), ETIMEDOUT);
        (void)close(p[0]);
        (void)close(p[1]);
}

TEST(read_until_eof_bad_fd) {
        char buf[4];
        int p[2];

        /* A descriptor number that was just closed: poll reports POLLNVAL
         * and the read says why. */
        ASSERT_OK(pipe2(p, O_CLOEXEC));
        (void)close(p[0]);
        (void)close(p[1]);
        ASSERT_ERROR(read_until_eof(p[0], buf, sizeof(buf), 1000), EBADF);
}

DEFINE_TEST_MAIN
