/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
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

/* More descriptors than one message carries (an image of 127 layers)
 * arrive whole and in order through the batches. */
TEST(fds_batched_carry_more_than_one_message) {
        enum { N = 2 * FD_MESSAGE_MAX + 2 };
        int sk[2], in[N], out[N];
        struct stat a, b;

        ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sk));
        for (size_t i = 0; i < N; i++)
                ASSERT_TRUE((in[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
        /* One message alone cannot. */
        ASSERT_ERROR(send_with_fds(sk[0], "x", 1, in, FD_MESSAGE_MAX + 1), E2BIG);
        ASSERT_OK(send_fds_batched(sk[0], in, N));
        ASSERT_OK(recv_fds_batched(sk[1], out, N));
        for (size_t i = 0; i < N; i++) {
                ASSERT_TRUE(out[i] >= 0 && out[i] != in[i]);
                ASSERT_OK(fstat(in[i], &a));
                ASSERT_OK(fstat(out[i], &b));
                ASSERT_TRUE(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
                ASSERT_EQ(fcntl(out[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
                (void)close(out[i]);
        }
        /* Twin: a batch of another count, or an end too early, is refused
         * with nothing left open. */
        ASSERT_OK(send_fds_batched(sk[0], in, FD_MESSAGE_MAX + 3));
        ASSERT_ERROR(recv_fds_batched(sk[1], out, FD_MESSAGE_MAX + 5), EBADMSG);
        for (size_t i = 0; i < FD_MESSAGE_MAX + 5; i++)
                ASSERT_EQ(out[i], -EBADF);
        ASSERT_OK(send_with_fds(sk[0], "im", 2, in, 1));
        ASSERT_ERROR(recv_fds_batched(sk[1], out, 1), EBADMSG);
        ASSERT_OK(send_fds_batched(sk[0], in, FD_MESSAGE_MAX));
        (void)close(sk[0]);
        ASSERT_ERROR(recv_fds_batched(sk[1], out, FD_MESSAGE_MAX + 1), EPIPE);
        ASSERT_EQ(out[0], -EBADF);
        for (size_t i = 0; i < N; i++)
                (void)close(in[i]);
        (void)close(sk[1]);
}

DEFINE_TEST_MAIN

/* write_file_atomic() and write_file_replace() (the same without the
 * fsyncs): the whole new content replaces the old, no temporary file is
 * left, and a folder that is not there is -ENOENT with nothing written. */
TEST(write_file_atomic_and_replace) {
        char dir[] = "/tmp/test-fd-util-XXXXXX";
        _cleanup_free_ char *path = NULL, *text = NULL, *again = NULL;
        struct dirent *de;
        size_t n = 0;
        DIR *d;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        ASSERT_TRUE(asprintf(&path, "%s/rec.json", dir) > 0);
        ASSERT_OK(write_file_atomic(dir, "rec.json", "old content", 11));
        ASSERT_OK(write_file_replace(dir, "rec.json", "new", 3));
        ASSERT_OK(read_full_file(path, 64, &text));
        ASSERT_STREQ(text, "new");
        ASSERT_OK(write_file_atomic(dir, "rec.json", "newer", 5));
        ASSERT_OK(read_full_file(path, 64, &again));
        ASSERT_STREQ(again, "newer");
        d = opendir(dir);
        ASSERT_TRUE(d != NULL);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        n++;
        (void)closedir(d);
        ASSERT_EQ(n, 1);

        ASSERT_ERROR(write_file_replace("/nonexistent-hutch-test", "rec.json", "x", 1), ENOENT);
        ASSERT_ERROR(write_file_atomic("/nonexistent-hutch-test", "rec.json", "x", 1), ENOENT);
        ASSERT_OK(unlink(path));
        ASSERT_OK(rmdir(dir));
}
