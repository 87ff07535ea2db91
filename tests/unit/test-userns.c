/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of the /etc/subuid reader (src/lib/ns/userns.c): only the lines of
 * the user asked for are judged (issue 24: a kernel or system table's
 * unrelated line must not be fatal), and those strictly. */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/userns.h"
#include "rm-rf.h"
#include "test.h"

static void assert_range(const char *text, uint32_t want) {
        uint32_t base = 0;
        int r;

        r = subid_find_range(text, "root", 0, 65536, &base);
        if (r != 1)
                fail_msg("\"%s\": %d, expected a range", text, r);
        ASSERT_EQ(base, want);
}

static void assert_no_range(const char *text, int err) {
        uint32_t base = 7;
        int r;

        r = subid_find_range(text, "root", 0, 65536, &base);
        if (r != -err)
                fail_msg("\"%s\": %d, expected %d", text, r, -err);
        ASSERT_EQ(base, 7U); /* untouched */
}

TEST(subid_reads_the_line_of_the_user) {
        assert_range("root:100000:65536\n", 100000);
        assert_range("root:100000:65536", 100000);
        assert_range("0:200000:65536\n", 200000);
        /* The first range big enough wins. */
        assert_range("root:100000:10\nroot:300000:65536\nroot:400000:65536\n", 300000);
        assert_range("\n\n# comment: root:1:2:3\nroot:100000:65536\n", 100000);
}

TEST(subid_skips_lines_of_other_users_whatever_they_hold) {
        static const char odd[] = "alice:100000:65536\n"
                                  "bob:not-a-number\n"
                                  "carol\n"
                                  ":::\n"
                                  "rootx:1:2\n"
                                  "dave:1:2:3:4\n"
                                  "erin:18446744073709551616:1\n"
                                  " root:5:65536\n"
                                  "\x01\xff\n";
        _cleanup_free_ char *text = NULL, *long_line = NULL;

        assert_no_range(odd, 0);
        ASSERT_TRUE(asprintf(&text, "%sroot:500000:65536\n", odd) > 0);
        assert_range(text, 500000);
        free(text);
        text = NULL;

        /* A line longer than any buffer, of another user. */
        long_line = malloc(10000);
        ASSERT_NOT_NULL(long_line);
        memset(long_line, 'x', 9999);
        long_line[9999] = '\0';
        ASSERT_TRUE(asprintf(&text, "%s\nroot:600000:65536\n", long_line) > 0);
        assert_range(text, 600000);
}

TEST(subid_refuses_a_bad_line_of_the_user) {
        _cleanup_free_ char *text = NULL, *zeros = NULL;

        assert_no_range("root\n", EINVAL);
        assert_no_range("root:100000\n", EINVAL);
        assert_no_range("root:100000:\n", EINVAL);
        assert_no_range("root::65536\n", EINVAL);
        assert_no_range("root:x:65536\n", EINVAL);
        assert_no_range("root:100000:65536:\n", EINVAL);
        assert_no_range("root:100000:65536:1\n", EINVAL);
        assert_no_range("root:-1:65536\n", EINVAL);
        assert_no_range("root:100000:65536 \n", EINVAL);
        assert_no_range("0:4294967296:65536\n", EINVAL);
        assert_no_range("root:4294967295:65536\n", ERANGE);
        /* Judged before a good line of the same user. */
        assert_no_range("root:bad:65536\nroot:100000:65536\n", EINVAL);
        /* A long line of the user is judged too, never skipped. */
        zeros = malloc(5000);
        ASSERT_NOT_NULL(zeros);
        memset(zeros, '0', 4999);
        zeros[4999] = '\0';
        ASSERT_TRUE(asprintf(&text, "root:%s1:65536\n", zeros) > 0);
        assert_range(text, 1);
        free(text);
        text = NULL;
        ASSERT_TRUE(asprintf(&text, "root:%sx:65536\nroot:1:65536\n", zeros) > 0);
        assert_no_range(text, EINVAL);
}

static void write_file(const char *path, const char *s) {
        FILE *f = fopen(path, "we");

        ASSERT_NOT_NULL(f);
        ASSERT_TRUE(fputs(s, f) >= 0);
        ASSERT_EQ(fclose(f), 0);
}

/* The files as root reads them: another user's odd line is no error. */
TEST(idmapping_for_root_ignores_other_users_lines) {
        char dir[] = "/tmp/hutch-test-userns-XXXXXX";
        _cleanup_free_ char *uid_path = NULL, *gid_path = NULL;
        static const char text[] = "alice:garbage\nroot:300000:65536\n";
        IdMapping m = {};

        if (geteuid() != 0) {
                fprintf(stderr, "skip: reads sub-id files only as root\n");
                skip();
        }
        ASSERT_NOT_NULL(mkdtemp(dir));
        ASSERT_TRUE(asprintf(&uid_path, "%s/subuid", dir) > 0);
        ASSERT_TRUE(asprintf(&gid_path, "%s/subgid", dir) > 0);
        write_file(uid_path, text);
        write_file(gid_path, "root:bad\n");

        ASSERT_ERROR(idmapping_for_caller(uid_path, gid_path, &m), EINVAL);
        write_file(gid_path, text);
        ASSERT_OK(idmapping_for_caller(uid_path, gid_path, &m));
        ASSERT_EQ(m.uid_base, 300000U);
        ASSERT_EQ(m.gid_base, 300000U);
        ASSERT_STREQ(m.uid_source, uid_path);

        (void)unlink(uid_path);
        (void)unlink(gid_path);
        (void)rmdir(dir);
}

TEST(passwd_name_of_reads_only_the_uid_field) {
        char dir[] = "/tmp/hutch-test-passwd-XXXXXX";
        _cleanup_free_ char *path = NULL, *name = NULL;

        ASSERT_NOT_NULL(mkdtemp(dir));
        ASSERT_TRUE(asprintf(&path, "%s/passwd", dir) > 0);
        write_file(path, "# comment\n"
                         "garbage\n"
                         "a:x:10000:1::/:/bin/sh\n"
                         "b:x:1000x:1::/:/bin/sh\n"
                         ":x:1000:1::/:/bin/sh\n"
                         "carol:x:1000:1000::/home/carol:/bin/sh\n"
                         "dave:x:1000:1000::/:/bin/sh\n");
        ASSERT_OK(passwd_name_of(path, 1000, &name));
        ASSERT_STREQ(name, "carol");
        ASSERT_ERROR(passwd_name_of(path, 100, &name), ENOENT);
        ASSERT_ERROR(passwd_name_of(path, 1, &name), ENOENT);
        ASSERT_STREQ(name, "carol"); /* untouched */
        (void)unlink(path);
        ASSERT_ERROR(passwd_name_of(path, 1000, &name), ENOENT);
        (void)rmdir(dir);
}

/* idmapping_for_caller_ranged() as the unprivileged user nobody (65534),
 * with sub-id files and helpers of the test's own; returns the child's
 * exit status (0: every check passed). */
static int ranged_as_nobody(const char *dir, bool quiet) {
        _cleanup_free_ char *su = NULL, *sg = NULL, *helpers = NULL, *nohelpers = NULL;
        IdMapping m;
        pid_t pid;
        int status = 0;

        ASSERT_TRUE(asprintf(&su, "%s/subuid", dir) > 0);
        ASSERT_TRUE(asprintf(&sg, "%s/subgid", dir) > 0);
        ASSERT_TRUE(asprintf(&helpers, "%s/bin", dir) > 0);
        ASSERT_TRUE(asprintf(&nohelpers, "%s/none", dir) > 0);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid > 0) {
                ASSERT_EQ(waitpid(pid, &status, 0), pid);
                return status;
        }
#define CHECK(c)                                                                                   \
        do {                                                                                       \
                if (!(c)) {                                                                        \
                        if (!quiet)                                                                \
                                fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);            \
                        _exit(1);                                                                  \
                }                                                                                  \
        } while (0)
        if (geteuid() == 0)
                CHECK(setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0);
        CHECK(geteuid() == 65534);
        /* The range and the helpers: the ranged map. */
        CHECK(idmapping_for_caller_ranged(su, sg, helpers, &m) == 0);
        CHECK(m.ranged && !m.privileged && m.count == 1 && m.uid_base == 65534);
        CHECK(m.sub_uid_base == 200000 && m.sub_gid_base == 300000 && m.sub_count == 65536);
        CHECK(m.no_range[0] == 0);
        /* Twin: no helpers, the single-id map and why. */
        CHECK(idmapping_for_caller_ranged(su, sg, nohelpers, &m) == 0);
        CHECK(!m.ranged && m.count == 1 && strstr(m.no_range, "newuidmap is missing"));
        /* Twin: no range in one file. */
        CHECK(idmapping_for_caller_ranged(su, nohelpers, helpers, &m) == 0);
        CHECK(!m.ranged && strstr(m.no_range, "usermod --add-subuids"));
        _exit(0);
#undef CHECK
}

TEST(ranged_map_needs_both_ranges_and_the_helpers) {
        char dir[] = "/tmp/hutch-test-ranged-XXXXXX";
        _cleanup_free_ char *p = NULL;

        if (geteuid() != 0 && geteuid() != 65534) {
                fprintf(stderr, "skip: runs as nobody (needs root)\n");
                skip();
        }
        ASSERT_NOT_NULL(mkdtemp(dir));
        ASSERT_EQ(chmod(dir, 0755), 0);
        ASSERT_TRUE(asprintf(&p, "%s/subuid", dir) > 0);
        write_file(p, "alice:bad\nnobody:200000:65536\n");
        free(p);
        ASSERT_TRUE(asprintf(&p, "%s/subgid", dir) > 0);
        write_file(p, "65534:300000:65536\n");
        free(p);
        ASSERT_TRUE(asprintf(&p, "%s/bin", dir) > 0);
        ASSERT_EQ(mkdir(p, 0755), 0);
        free(p);
        ASSERT_TRUE(asprintf(&p, "%s/bin/newuidmap", dir) > 0);
        write_file(p, "");
        ASSERT_EQ(chmod(p, 0755), 0);
        free(p);
        ASSERT_TRUE(asprintf(&p, "%s/bin/newgidmap", dir) > 0);
        write_file(p, "");
        ASSERT_EQ(chmod(p, 0755), 0);
        free(p);
        p = NULL;

        ASSERT_EQ(ranged_as_nobody(dir, false), 0);

        /* SECURITY: a range holding host id 0 or the caller's own id. */
        ASSERT_TRUE(asprintf(&p, "%s/subuid", dir) > 0);
        write_file(p, "nobody:0:65536\n");
        ASSERT_TRUE(ranged_as_nobody(dir, true) != 0);
        write_file(p, "nobody:65000:65536\n");
        ASSERT_TRUE(ranged_as_nobody(dir, true) != 0);
        (void)rm_rf_at(AT_FDCWD, dir);
}

DEFINE_TEST_MAIN
