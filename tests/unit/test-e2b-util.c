/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of hutch serve --e2b (src/cli/e2b-util.c). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "e2b-internal.h"
#include "test.h"

#define ID "abcdefghij0123456789"

TEST(id_valid) {
        ASSERT_TRUE(e2b_id_is_valid(ID));
        ASSERT_FALSE(e2b_id_is_valid(NULL));
        ASSERT_FALSE(e2b_id_is_valid(""));
        ASSERT_FALSE(e2b_id_is_valid("abcdefghij012345678"));   /* 19 */
        ASSERT_FALSE(e2b_id_is_valid("abcdefghij0123456789a")); /* 21 */
        ASSERT_FALSE(e2b_id_is_valid("Abcdefghij0123456789"));  /* upper case */
        ASSERT_FALSE(e2b_id_is_valid("abcdefghij012345678."));
        ASSERT_FALSE(e2b_id_is_valid("../../etc/passwd0000"));
}

TEST(id_new) {
        char a[E2B_ID_LEN + 1], b[E2B_ID_LEN + 1], t[E2B_TOKEN_LEN + 1];

        ASSERT_OK(e2b_id_new(a));
        ASSERT_OK(e2b_id_new(b));
        ASSERT_TRUE(e2b_id_is_valid(a));
        ASSERT_TRUE(e2b_id_is_valid(b));
        ASSERT_FALSE(strcmp(a, b) == 0);
        ASSERT_OK(e2b_token_new(t));
        ASSERT_EQ(strlen(t), E2B_TOKEN_LEN);
}

TEST(host_parse) {
        char id[E2B_ID_LEN + 1];
        unsigned port = 0;

        ASSERT_TRUE(e2b_host_parse("8000-" ID ".e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_EQ(port, 8000);
        ASSERT_STREQ(id, ID);
        /* A port after the host, a trailing dot, any case. */
        ASSERT_TRUE(e2b_host_parse("1-" ID ".E2B.localhost.:49983", "e2b.localhost", &port, id));
        ASSERT_EQ(port, 1);
        ASSERT_TRUE(e2b_host_parse("65535-ABCDEFGHIJ0123456789.e2b.localhost", "e2b.localhost",
                                   &port, id));
        ASSERT_STREQ(id, ID);
        ASSERT_EQ(port, 65535);

        /* Negative twins. */
        port = 7;
        ASSERT_FALSE(e2b_host_parse(NULL, "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("127.0.0.1:3000", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("0-" ID ".e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("65536-" ID ".e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("123456-" ID ".e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("-" ID ".e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("80x-" ID ".e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("80-" ID "x.e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("80-abc.e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(
                e2b_host_parse("80-" ID ".e2b.localhost.evil.test", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("80-" ID ".xe2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(e2b_host_parse("80-" ID "e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_FALSE(
                e2b_host_parse("80-../../etc/passwd00.e2b.localhost", "e2b.localhost", &port, id));
        ASSERT_EQ(port, 7);
}

TEST(chunk_size) {
        uint64_t n = 0;

        ASSERT_OK(e2b_chunk_size_parse("0", &n));
        ASSERT_EQ(n, 0);
        ASSERT_OK(e2b_chunk_size_parse("1a2B", &n));
        ASSERT_EQ(n, 0x1a2b);
        ASSERT_OK(e2b_chunk_size_parse("ff;name=value", &n));
        ASSERT_EQ(n, 255);
        ASSERT_OK(e2b_chunk_size_parse("ffffffffffffffff", &n));
        ASSERT_EQ(n, UINT64_MAX);

        n = 5;
        ASSERT_ERROR(e2b_chunk_size_parse("", &n), EBADMSG);
        ASSERT_ERROR(e2b_chunk_size_parse(";x", &n), EBADMSG);
        ASSERT_ERROR(e2b_chunk_size_parse("-1", &n), EBADMSG);
        ASSERT_ERROR(e2b_chunk_size_parse("0x10", &n), EBADMSG);
        ASSERT_ERROR(e2b_chunk_size_parse("1g", &n), EBADMSG);
        ASSERT_ERROR(e2b_chunk_size_parse("10000000000000000", &n), EBADMSG);
        ASSERT_EQ(n, 5);
}

TEST(allow_within) {
        char *ceiling[] = {(char *)"api.example.test", (char *)"*.example.org:8443",
                           (char *)"127.0.0.1:9000", NULL};
        char *empty[] = {NULL};

        ASSERT_TRUE(hutch_ext_host_within(ceiling, "api.example.test"));
        ASSERT_TRUE(hutch_ext_host_within(ceiling, "API.example.test:443"));
        ASSERT_TRUE(hutch_ext_host_within(ceiling, "api.example.test:80"));
        ASSERT_TRUE(hutch_ext_host_within(ceiling, "a.example.org:8443"));
        ASSERT_TRUE(hutch_ext_host_within(ceiling, "*.example.org:8443"));
        ASSERT_TRUE(hutch_ext_host_within(ceiling, "*.b.example.org:8443"));
        ASSERT_TRUE(hutch_ext_host_within(ceiling, "127.0.0.1:9000"));

        /* Wider than the ceiling, or beside it: refused. */
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "api.example.test:8080"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "other.example.test"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "*.example.test"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "example.org:8443"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "a.example.org"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "*.org:8443"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "evilexample.org:8443"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "127.0.0.1"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "127.0.0.2:9000"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, "0.0.0.0/0"));
        ASSERT_FALSE(hutch_ext_host_within(ceiling, ""));
        ASSERT_FALSE(hutch_ext_host_within(empty, "api.example.test"));
        ASSERT_FALSE(hutch_ext_host_within(NULL, "api.example.test"));
}

/* Whether process @pid waits for a flock (a "->" line of /proc/locks). */
static bool waits_for_lock(pid_t pid) {
        char line[256], want[32];
        bool found = false;
        FILE *f = fopen("/proc/locks", "re");

        if (!f)
                return false;
        (void)snprintf(want, sizeof(want), " %d ", (int)pid);
        while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, "->") && strstr(line, want);
        (void)fclose(f);
        return found;
}

/* A sandbox's lock taken by a waiter after its holder removed the lock
 * file (e2b_table_remove(): a kill's end) is on the file the name holds
 * then: a later opener cannot take it too. On the removed file two
 * requests held "the" lock at once. */
TEST(table_lock_after_the_file_was_removed) {
        char dir[] = "/tmp/test-e2b-lock-XXXXXX", path[128];
        E2bServer srv = {.table_lock = -EBADF};
        int go[2], locked[2], held, fd, status;
        char c = 0;
        pid_t pid;

        ASSERT_NOT_NULL(mkdtemp(dir));
        srv.table_dir = dir;
        (void)snprintf(path, sizeof(path), "%s/%s.lock", dir, ID);
        ASSERT_OK(pipe2(go, O_CLOEXEC));
        ASSERT_OK(pipe2(locked, O_CLOEXEC));
        held = e2b_table_lock(&srv, ID);
        ASSERT_OK(held);
        pid = fork();
        ASSERT_OK(pid);
        if (pid == 0) {
                int w;

                /* The parent's lock is on the description this copy
                 * shares: only the parent holds it. */
                (void)close(held);
                (void)close(go[1]);
                (void)close(locked[0]);
                (void)alarm(60); /* never left behind by a failed test */
                w = e2b_table_lock(&srv, ID);

                c = w >= 0 ? 'y' : 'n';
                (void)!write(locked[1], &c, 1);
                (void)!read(go[0], &c, 1);
                _exit(0);
        }
        /* Only the child's ends: a child gone is an EOF, not a hang. */
        ASSERT_OK(close(locked[1]));
        ASSERT_OK(close(go[0]));
        locked[1] = go[0] = -EBADF;
        for (int i = 0; i < 10000 && !waits_for_lock(pid); i++)
                (void)usleep(1000);
        ASSERT_TRUE(waits_for_lock(pid));
        /* The holder's end: the file removed, then the lock let go. */
        ASSERT_OK(unlink(path));
        ASSERT_OK(close(held));
        ASSERT_EQ(read(locked[0], &c, 1), 1);
        ASSERT_EQ(c, 'y');
        /* The next opener finds the waiter's lock on the file of that name. */
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        ASSERT_OK(fd);
        ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), -1);
        ASSERT_EQ(errno, EWOULDBLOCK);
        ASSERT_OK(close(fd));
        ASSERT_EQ(write(go[1], &c, 1), 1);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        /* Its twin: once the waiter let go, the lock is free. */
        fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        ASSERT_OK(fd);
        ASSERT_OK(flock(fd, LOCK_EX | LOCK_NB));
        ASSERT_OK(close(fd));
        ASSERT_OK(unlink(path));
        ASSERT_OK(rmdir(dir));
        ASSERT_OK(close(go[1]));
        ASSERT_OK(close(locked[0]));
}

DEFINE_TEST_MAIN
