/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

TEST(read_full_fd_binary_and_cap) {
        _cleanup_free_ char *s = NULL;
        size_t n = 0;
        int fd = memfd_create("t", MFD_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, "a\0b\n", 4));
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        ASSERT_OK(read_full_fd(fd, 4, &s, &n));
        ASSERT_EQ(n, 4);
        ASSERT_EQ(memcmp(s, "a\0b\n", 5), 0); /* NUL-terminated too */
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        ASSERT_ERROR(read_full_fd(fd, 3, &s, &n), EFBIG);
        (void)close(fd);
}

/* A scratch directory with a file "f", a directory "d", a symlink "l" to
 * "d" and a FIFO "p". */
static int scratch(char *path) {
        int fd;

        if (!mkdtemp(path))
                fail_msg("mkdtemp: %s", strerror(errno));
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(mkdirat(fd, "d", 0755));
        ASSERT_OK(symlinkat("d", fd, "l"));
        ASSERT_OK(mkfifoat(fd, "p", 0644));
        ASSERT_OK(close(openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644)));
        return fd;
}

static void unscratch(const char *path, int fd) {
        (void)unlinkat(fd, "f", 0);
        (void)unlinkat(fd, "l", 0);
        (void)unlinkat(fd, "p", 0);
        (void)unlinkat(fd, "d", AT_REMOVEDIR);
        (void)close(fd);
        (void)rmdir(path);
}

TEST(open_checked_at) {
        char path[] = "/tmp/hutch-test-fd-util-XXXXXX";
        int fd = scratch(path), f;
        struct stat sf, sd, sp;

        ASSERT_OK(fstatat(fd, "f", &sf, AT_SYMLINK_NOFOLLOW));
        ASSERT_OK(fstatat(fd, "d", &sd, AT_SYMLINK_NOFOLLOW));
        ASSERT_OK(fstatat(fd, "p", &sp, AT_SYMLINK_NOFOLLOW));
        f = open_regular_at(fd, "f", &sf);
        ASSERT_OK(f);
        ASSERT_EQ(fcntl(f, F_GETFL) & O_NONBLOCK, 0);
        (void)close(f);
        f = open_directory_at(fd, "d", &sd);
        ASSERT_OK(f);
        (void)close(f);
        /* Swapped entries: a FIFO is never waited on, a symlink never
         * followed, another inode is stale. */
        ASSERT_ERROR(open_regular_at(fd, "p", &sf), ESTALE);
        ASSERT_ERROR(open_regular_at(fd, "d", &sf), ESTALE);
        ASSERT_ERROR(open_regular_at(fd, "l", &sf), ELOOP);
        ASSERT_ERROR(open_directory_at(fd, "l", &sd), ENOTDIR);
        ASSERT_ERROR(open_directory_at(fd, "d", &sf), ESTALE);
        ASSERT_ERROR(open_regular_at(fd, "gone", &sf), ENOENT);
        unscratch(path, fd);
}

TEST(openat_beneath_refuses_symlinks_and_escapes) {
        char path[] = "/tmp/hutch-test-fd-util-XXXXXX";
        int fd = scratch(path), f;

        f = openat_beneath(fd, "d", O_RDONLY | O_DIRECTORY, 0);
        ASSERT_OK(f);
        ASSERT_EQ(fcntl(f, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        (void)close(f);
        f = openat_beneath(fd, "d/new", O_WRONLY | O_CREAT | O_EXCL, 0600);
        ASSERT_OK(f);
        (void)close(f);
        ASSERT_OK(unlinkat(fd, "d/new", 0));
        ASSERT_ERROR(openat_beneath(fd, "l", O_RDONLY, 0), ELOOP);
        ASSERT_ERROR(openat_beneath(fd, "l/x", O_RDONLY, 0), ELOOP);
        ASSERT_ERROR(openat_beneath(fd, "../etc", O_RDONLY, 0), EXDEV);
        ASSERT_ERROR(openat_beneath(fd, "/etc", O_RDONLY, 0), EXDEV);
        unscratch(path, fd);
}

TEST(opendir_fd_starts_over) {
        char path[] = "/tmp/hutch-test-fd-util-XXXXXX";
        int fd = scratch(path);

        for (int round = 0; round < 2; round++) {
                _cleanup_(closedirp) DIR *d = NULL;
                int n = 0;

                ASSERT_OK(opendir_fd(fd, &d));
                while (readdir_no_dot(d))
                        n++;
                ASSERT_EQ(errno, 0);
                ASSERT_EQ(n, 4); /* f, d, l, p */
        }
        ASSERT_ERROR(opendir_fd(-EBADF, &(DIR *){NULL}), EBADF);
        unscratch(path, fd);
}

TEST(fd_reopen_nonblocking_pipes_and_terminals_only) {
        static char buf[4096];
        int p[2], w, pty, tty;
        ssize_t n = 0;

        /* A pipe's blocking write end: the new description does not block
         * when the pipe is full, the old one is left as it was. */
        ASSERT_OK(pipe2(p, O_CLOEXEC));
        w = fd_reopen_nonblocking(p[1], O_WRONLY);
        ASSERT_OK(w);
        ASSERT_TRUE(fcntl(w, F_GETFL) & O_NONBLOCK);
        ASSERT_FALSE(fcntl(p[1], F_GETFL) & O_NONBLOCK);
        ASSERT_TRUE(fcntl(w, F_GETFD) & FD_CLOEXEC);
        for (size_t i = 0; i < 1024 && n >= 0; i++)
                n = write(w, buf, sizeof(buf));
        ASSERT_EQ(n, -1);
        ASSERT_EQ(errno, EAGAIN);
        (void)close(w);
        /* Its read end too. */
        w = fd_reopen_nonblocking(p[0], O_RDONLY);
        ASSERT_OK(w);
        ASSERT_EQ(read(w, buf, 1), 1);
        (void)close(w);
        (void)close(p[0]);
        (void)close(p[1]);

        /* A terminal: the same. */
        pty = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        ASSERT_OK(pty);
        ASSERT_OK(grantpt(pty));
        ASSERT_OK(unlockpt(pty));
        tty = open(ptsname(pty), O_RDWR | O_NOCTTY | O_CLOEXEC);
        ASSERT_OK(tty);
        w = fd_reopen_nonblocking(tty, O_RDONLY);
        ASSERT_OK(w);
        ASSERT_EQ(read(w, buf, 1), -1);
        ASSERT_EQ(errno, EAGAIN);
        (void)close(w);
        (void)close(tty);
        (void)close(pty);

        /* A file, /dev/null: not reopened. */
        w = open("/dev/null", O_RDWR | O_CLOEXEC);
        ASSERT_OK(w);
        ASSERT_ERROR(fd_reopen_nonblocking(w, O_WRONLY), EOPNOTSUPP);
        (void)close(w);
        w = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        ASSERT_OK(w);
        ASSERT_ERROR(fd_reopen_nonblocking(w, O_RDONLY), EOPNOTSUPP);
        (void)close(w);
}

TEST(mkdir_private_refuses_a_folder_others_can_write) {
        char t[] = "/tmp/hutch-test-fd-util-XXXXXX";
        _cleanup_free_ char *sub = NULL, *deep = NULL, *file = NULL;
        HutchError e = {};
        struct stat st;

        ASSERT_NOT_NULL(mkdtemp(t));
        ASSERT_TRUE(asprintf(&sub, "%s/d", t) >= 0);
        ASSERT_TRUE(asprintf(&deep, "%s/a/b", t) >= 0);
        ASSERT_TRUE(asprintf(&file, "%s/f", t) >= 0);
        /* Made 0700 (parents too), and found again. */
        ASSERT_OK(mkdir_private(sub));
        ASSERT_OK(lstat(sub, &st));
        ASSERT_EQ(st.st_mode & 07777, 0700);
        ASSERT_OK(mkdir_private(sub));
        ASSERT_OK(mkdir_private(deep));
        /* Ours, but group- or other-writable: refused (a folder another
         * user made first and chowned cannot be, but one left 0777 is as
         * open). 0755 is fine: nobody else can change it. */
        ASSERT_OK(chmod(sub, 0777));
        ASSERT_ERROR(mkdir_private(sub), EACCES);
        ASSERT_OK(chmod(sub, 0770));
        ASSERT_ERROR(mkdir_private(sub), EACCES);
        ASSERT_OK(chmod(sub, 01777));
        ASSERT_ERROR(mkdir_private(sub), EACCES);
        ASSERT_ERROR(mkdir_private_error("state directory", sub, -EACCES, &e), EACCES);
        ASSERT_TRUE(strstr(e.msg, sub) != NULL);
        ASSERT_TRUE(strstr(e.msg, "mode 1777") != NULL);
        ASSERT_OK(chmod(sub, 0755));
        ASSERT_OK(mkdir_private(sub));
        /* Not a directory: refused. */
        ASSERT_OK(close(open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)));
        ASSERT_ERROR(mkdir_private(file), EPERM);
        if (geteuid() == 0) {
                /* Someone else's, however private: refused. */
                ASSERT_OK(chmod(sub, 0700));
                ASSERT_OK(chown(sub, 65534, 65534));
                ASSERT_ERROR(mkdir_private(sub), EPERM);
        }
        (void)unlink(file);
        (void)rmdir(sub);
        (void)rmdir(deep);
        *strrchr(deep, '/') = '\0';
        (void)rmdir(deep);
        (void)rmdir(t);
}

DEFINE_TEST_MAIN
