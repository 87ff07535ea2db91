/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tar of the file builtin (sandbox/file-tar.h), run here on temporary
 * directories: a tree round-trips byte-identical, and each hostile archive
 * is refused with its message, writing nothing outside the directory. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "file-tar.h"
#include "rm-rf.h"
#include "test.h"

static char *tmp_dir(void) {
        char *d = strdup("/tmp/test-file-tar-XXXXXX");

        ASSERT_NOT_NULL(d);
        ASSERT_NOT_NULL(mkdtemp(d));
        return d;
}

static int mem_fd(const void *data, size_t len) {
        int fd = memfd_create("test-file-tar", MFD_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        if (len > 0)
                ASSERT_OK(loop_write(fd, data, len));
        ASSERT_TRUE(lseek(fd, 0, SEEK_SET) == 0);
        return fd;
}

static char *fd_take(int fd, off_t from, size_t *ret_len) {
        char *s = NULL;

        ASSERT_TRUE(lseek(fd, from, SEEK_SET) == from);
        ASSERT_OK(read_full_fd(fd, 64 << 20, &s, ret_len));
        return s;
}

static char *pack(const char *dir, size_t *ret_len) {
        int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), out = mem_fd(NULL, 0);
        char *s;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(file_tar_pack(dfd, NULL, 64 << 20, out));
        s = fd_take(out, 0, ret_len);
        (void)close(out);
        (void)close(dfd);
        return s;
}

/* Unpacks @data into @dir; on failure the message in @msg. */
static int unpack(const char *dir, const void *data, size_t len, char msg[static 512]) {
        int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), fd = mem_fd(data, len);
        char *m;
        int r;

        ASSERT_TRUE(dfd >= 0);
        r = file_tar_unpack(dfd, NULL, false, len > 0 ? len : 1, fd, fd);
        m = fd_take(fd, (off_t)len, NULL);
        (void)snprintf(msg, 512, "%s", m);
        free(m);
        (void)close(fd);
        (void)close(dfd);
        return r;
}

/* One ustar header for @name, @type, @size and @link, then @size bytes of
 * 'x' padded, then the end; written to @buf (large enough). */
static size_t one_entry(char *buf, const char *name, char type, size_t size, const char *link) {
        unsigned sum = 0;
        size_t n = 512 + (size + 511) / 512 * 512 + 1024;

        memset(buf, 0, n);
        memcpy(buf, name, strlen(name));
        memcpy(buf + 100, "0000644", 7);
        (void)snprintf(buf + 124, 12, "%011zo", size);
        memcpy(buf + 136, "00000000000", 11);
        memset(buf + 148, ' ', 8);
        buf[156] = type;
        if (link)
                memcpy(buf + 157, link, strlen(link));
        memcpy(buf + 257, "ustar", 6);
        memcpy(buf + 263, "00", 2);
        for (size_t i = 0; i < 512; i++)
                sum += (unsigned char)buf[i];
        (void)snprintf(buf + 148, 8, "%06o", sum);
        memset(buf + 512, 'x', size);
        return n;
}

TEST(round_trip_is_byte_identical) {
        _cleanup_free_ char *a = tmp_dir(), *b = tmp_dir(), *t1 = NULL, *t2 = NULL;
        char msg[512] = "", p[256];
        size_t n1 = 0, n2 = 0;
        int fd;

        (void)snprintf(p, sizeof(p), "%s/d", a);
        ASSERT_OK(mkdir(p, 0750));
        (void)snprintf(p, sizeof(p), "%s/d/f", a);
        fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, "data\n", 5));
        (void)close(fd);
        (void)snprintf(p, sizeof(p), "%s/l", a);
        ASSERT_OK(symlink("d/f", p));
        (void)snprintf(p, sizeof(p), "%s/ro", a);
        ASSERT_OK(mkdir(p, 0555));
        t1 = pack(a, &n1);
        ASSERT_TRUE(n1 > 0 && n1 % 512 == 0);
        ASSERT_OK(unpack(b, t1, n1, msg));
        t2 = pack(b, &n2);
        ASSERT_TRUE(n1 == n2 && memcmp(t1, t2, n1) == 0);
        ASSERT_OK(rm_rf_at(AT_FDCWD, a));
        ASSERT_OK(rm_rf_at(AT_FDCWD, b));
}

static void refused(const char *name, char type, size_t size, const char *link, int err,
                    const char *words) {
        _cleanup_free_ char *d = tmp_dir(), *buf = calloc(1, 4096);
        char msg[512] = "";
        size_t n;

        ASSERT_NOT_NULL(buf);
        n = one_entry(buf, name, type, size, link);
        ASSERT_ERROR(unpack(d, buf, n, msg), err);
        ASSERT_NOT_NULL(strstr(msg, words));
        ASSERT_OK(rm_rf_at(AT_FDCWD, d));
}

TEST(hostile_entries) {
        refused("../x", '0', 1, NULL, EPERM, "'..' component");
        refused("/x", '0', 1, NULL, EPERM, "absolute path");
        refused("up", '2', 0, "../..", EPERM, "pointing outside");
        refused("abs", '2', 0, "/../etc", EPERM, "pointing outside");
        refused("hl", '1', 0, "../secret", EPERM, "hard link");
        refused("hl", '1', 0, "nothing-here", EPERM, "hard link");
        refused("dev", '3', 0, NULL, EPERM, "device node");
        refused("fifo", '6', 0, NULL, EPERM, "fifo");
        refused("sparse", 'S', 0, NULL, EINVAL, "unsupported entry type");
}

TEST(garbage_and_truncation) {
        _cleanup_free_ char *d = tmp_dir(), *buf = calloc(1, 4096);
        char msg[512] = "";
        size_t n;

        ASSERT_NOT_NULL(buf);
        memset(buf, 'z', 1024);
        ASSERT_ERROR(unpack(d, buf, 1024, msg), EBADMSG);
        ASSERT_NOT_NULL(strstr(msg, "checksum"));
        ASSERT_ERROR(unpack(d, buf, 0, msg), EBADMSG);
        n = one_entry(buf, "f", '0', 100, NULL);
        ASSERT_ERROR(unpack(d, buf, 512 + 100 + 10, msg), EBADMSG);
        ASSERT_NOT_NULL(strstr(msg, "truncated"));
        ASSERT_OK(unpack(d, buf, n, msg));
        /* Declares more than the archive holds: refused before writing. */
        (void)one_entry(buf, "big", '0', 2048, NULL);
        ASSERT_ERROR(unpack(d, buf, 512 + 100, msg), EFBIG);
        ASSERT_NOT_NULL(strstr(msg, "more than the archive holds"));
        ASSERT_TRUE(faccessat(AT_FDCWD, d, F_OK, 0) == 0);
        ASSERT_OK(rm_rf_at(AT_FDCWD, d));
}

DEFINE_TEST_MAIN
