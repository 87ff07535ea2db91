/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's streaming exec door (src/lib/api/hutch-ext-stream.c): its
 * argument checks and the pty's window size. The exec itself, through a
 * keeper of either backend, is the integration tests' (test_terminal.py,
 * test_e2b_envd.py). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "test-util.h"
#include "test.h"

TEST(exec_stream_open_needs_a_command) {
        char *empty[] = {NULL};
        HutchExtStreamOpts o = {.argv = empty};
        HutchExtStream *s = NULL;
        HutchError err = {};

        ASSERT_ERROR(hutch_ext_exec_stream_open("a", &o, &s, &err), EINVAL);
        ASSERT_NULL(s);
        ASSERT_TRUE(err.msg[0] != '\0');
        o.argv = NULL;
        ASSERT_ERROR(hutch_ext_exec_stream_open("a", &o, &s, NULL), EINVAL);
        ASSERT_ERROR(hutch_ext_exec_stream_open(NULL, &o, &s, NULL), EINVAL);
        ASSERT_ERROR(hutch_ext_exec_stream_open("a", NULL, &s, NULL), EINVAL);
        ASSERT_NULL(s);
}

/* The twin: a well-formed exec gets past the checks to the store, which
 * has no such sandbox. */
TEST(exec_stream_open_names_a_missing_sandbox) {
        _cleanup_tmpdir_ char *home = make_tmpdir();
        char *argv[] = {(char *)"true", NULL};
        HutchExtStreamOpts o = {.argv = argv, .stdin_pipe = true};
        const char *old = getenv("HUTCH_HOME");
        char *saved = old ? strdup(old) : NULL;
        HutchExtStream *s = NULL;
        HutchError err = {};

        ASSERT_OK(setenv("HUTCH_HOME", home, 1));
        ASSERT_ERROR(hutch_ext_exec_stream_open("nosuch", &o, &s, &err), ENOENT);
        ASSERT_NULL(s);
        ASSERT_TRUE(strstr(err.msg, "nosuch") != NULL);
        if (saved)
                ASSERT_OK(setenv("HUTCH_HOME", saved, 1));
        else
                ASSERT_OK(unsetenv("HUTCH_HOME"));
        free(saved);
}

TEST(exec_stream_resize_sets_the_window) {
        struct winsize w = {};
        int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);

        ASSERT_OK(master);
        ASSERT_OK(hutch_ext_exec_stream_resize(master, 132, 43));
        ASSERT_OK(ioctl(master, TIOCGWINSZ, &w));
        ASSERT_EQ(w.ws_col, 132);
        ASSERT_EQ(w.ws_row, 43);
        (void)close(master);
}

/* The twin: a descriptor that is no terminal is refused, not ignored. */
TEST(exec_stream_resize_refuses_a_pipe) {
        int p[2];

        ASSERT_OK(pipe2(p, O_CLOEXEC));
        ASSERT_ERROR(hutch_ext_exec_stream_resize(p[1], 80, 24), ENOTTY);
        (void)close(p[0]);
        (void)close(p[1]);
        ASSERT_ERROR(hutch_ext_exec_stream_resize(-EBADF, 80, 24), EBADF);
}

TEST(exec_stream_close_and_abandon_take_null) {
        ASSERT_NULL(hutch_ext_exec_stream_close(NULL));
        hutch_ext_exec_stream_pty_abandon(NULL);
}

DEFINE_TEST_MAIN
