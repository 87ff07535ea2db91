/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "ns/mount-util.h"
#include "test.h"

/* mount_point_open_beneath() makes directories and files only: no
 * privilege is needed to test it. Each test gets a folder with "root"
 * (the tree the mount points go into) and "outside" (what symlinks in
 * root lead to, which must stay empty). */
typedef struct Tree {
        char base[64];
        int root;
        int outside;
} Tree;

static void tree_new(Tree *t) {
        int base;

        (void)snprintf(t->base, sizeof(t->base), "/tmp/test-mount-util-XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(t->base));
        base = open(t->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_OK(base);
        ASSERT_OK(mkdirat(base, "root", 0755));
        ASSERT_OK(mkdirat(base, "outside", 0755));
        t->root = openat(base, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_OK(t->root);
        t->outside = openat(base, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_OK(t->outside);
        (void)close(base);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)flag;
        (void)ftw;
        return remove(path) < 0 ? -1 : 0;
}

static void tree_free(Tree *t) {
        (void)close(t->root);
        (void)close(t->outside);
        ASSERT_OK(nftw(t->base, remove_entry, 16, FTW_DEPTH | FTW_PHYS));
}

/* The number of entries in "outside". */
static size_t outside_entries(const Tree *t) {
        DIR *d = NULL;
        size_t n = 0;

        ASSERT_OK(opendir_fd(t->outside, &d));
        while (readdir_no_dot(d))
                n++;
        (void)closedir(d);
        return n;
}

static mode_t type_at(int dirfd, const char *path) {
        struct stat st;

        if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        return st.st_mode & S_IFMT;
}

/* The descriptor returned is the mount point itself. */
static void assert_fd_is(int fd, int dirfd, const char *path) {
        struct stat a, b;

        ASSERT_OK(fstat(fd, &a));
        ASSERT_OK(fstatat(dirfd, path, &b, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(a.st_dev, b.st_dev);
        ASSERT_EQ(a.st_ino, b.st_ino);
        ASSERT_EQ(fcntl(fd, F_GETFL) & O_PATH, O_PATH);
}

TEST(missing_directories_are_made) {
        Tree t;
        int fd;

        tree_new(&t);
        fd = mount_point_open_beneath(t.root, "/a/b//c", true, NULL);
        ASSERT_OK(fd);
        assert_fd_is(fd, t.root, "a/b/c");
        ASSERT_EQ(type_at(t.root, "a/b/c"), S_IFDIR);
        (void)close(fd);
        /* Again: everything exists now. */
        fd = mount_point_open_beneath(t.root, "/a/b/c/", true, NULL);
        ASSERT_OK(fd);
        assert_fd_is(fd, t.root, "a/b/c");
        (void)close(fd);
        tree_free(&t);
}

TEST(missing_file_is_made_empty) {
        struct stat st;
        Tree t;
        int fd;

        tree_new(&t);
        fd = mount_point_open_beneath(t.root, "/etc2/x/file", false, NULL);
        ASSERT_OK(fd);
        assert_fd_is(fd, t.root, "etc2/x/file");
        ASSERT_OK(fstatat(t.root, "etc2/x/file", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISREG(st.st_mode));
        ASSERT_EQ(st.st_size, 0);
        ASSERT_EQ(type_at(t.root, "etc2/x"), S_IFDIR);
        (void)close(fd);
        /* An existing file is used as it is. */
        fd = mount_point_open_beneath(t.root, "/etc2/x/file", false, NULL);
        ASSERT_OK(fd);
        (void)close(fd);
        tree_free(&t);
}

TEST(symlink_in_the_path_is_refused_and_nothing_is_made_through_it) {
        static const char *const links[] = {"../outside", "../../../../../../../outside-abs"};
        Tree t;

        tree_new(&t);
        ASSERT_OK(mkdirat(t.root, "ws", 0755));
        ASSERT_OK(symlinkat("../../outside", t.root, "ws/link"));
        for (int dir = 0; dir <= 1; dir++) {
                size_t len = 0;

                ASSERT_ERROR(mount_point_open_beneath(t.root, "/ws/link/squat/sub", dir, &len),
                             ELOOP);
                ASSERT_EQ(len, strlen("/ws/link"));
                ASSERT_ERROR(mount_point_open_beneath(t.root, "/ws/link/f", dir, NULL), ELOOP);
        }
        ASSERT_EQ(outside_entries(&t), 0);
        /* A symlink as a top-level component, relative or absolute. */
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                ASSERT_OK(symlinkat(links[i], t.root, "top"));
                ASSERT_ERROR(mount_point_open_beneath(t.root, "/top/x", true, NULL), ELOOP);
                ASSERT_OK(unlinkat(t.root, "top", 0));
        }
        ASSERT_OK(symlinkat("/tmp", t.root, "abs"));
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/abs/hutch-test-never", true, NULL), ELOOP);
        ASSERT_EQ(access("/tmp/hutch-test-never", F_OK), -1);
        ASSERT_EQ(outside_entries(&t), 0);
        /* Twin: the same path with a directory in place of the link. */
        ASSERT_OK(unlinkat(t.root, "ws/link", 0));
        ASSERT_OK(mkdirat(t.root, "ws/link", 0755));
        ASSERT_OK(close(mount_point_open_beneath(t.root, "/ws/link/squat/sub", true, NULL)));
        ASSERT_EQ(type_at(t.root, "ws/link/squat/sub"), S_IFDIR);
        tree_free(&t);
}

TEST(symlink_as_the_mount_point_is_refused) {
        size_t len = 0;
        Tree t;

        tree_new(&t);
        /* To a directory, to a file, and dangling (where O_CREAT would
         * make the file the link names). */
        ASSERT_OK(symlinkat("../outside", t.root, "d"));
        ASSERT_OK(close(openat(t.outside, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644)));
        ASSERT_OK(symlinkat("../outside/f", t.root, "f"));
        ASSERT_OK(symlinkat("../outside/new", t.root, "dangling"));
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/d", true, &len), ELOOP);
        ASSERT_EQ(len, 2);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/f", false, NULL), ELOOP);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/dangling", false, NULL), ELOOP);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/dangling", true, NULL), ELOOP);
        ASSERT_EQ(outside_entries(&t), 1);
        ASSERT_EQ(type_at(t.outside, "new"), 0);
        tree_free(&t);
}

TEST(wrong_types) {
        size_t len = 0;
        Tree t;

        tree_new(&t);
        ASSERT_OK(mount_point_open_beneath(t.root, "/file", false, NULL));
        ASSERT_OK(mkdirat(t.root, "dir", 0755));
        /* A file where a parent has to be. */
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/file/x", true, &len), ENOTDIR);
        ASSERT_EQ(len, strlen("/file"));
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/file/x", false, NULL), ENOTDIR);
        /* A file for a directory mount, a directory for a file mount. */
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/file", true, NULL), ENOTDIR);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/dir", false, NULL), EISDIR);
        tree_free(&t);
}

TEST(bad_paths) {
        char long_name[NAME_MAX + 3];
        Tree t;

        tree_new(&t);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "relative", true, NULL), EINVAL);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/", true, NULL), EINVAL);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "///", true, NULL), EINVAL);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/a/../../outside/x", true, NULL), EINVAL);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/a/./b", true, NULL), EINVAL);
        ASSERT_ERROR(mount_point_open_beneath(t.root, "/..", true, NULL), EINVAL);
        long_name[0] = '/';
        memset(long_name + 1, 'x', NAME_MAX + 1);
        long_name[NAME_MAX + 2] = '\0';
        ASSERT_ERROR(mount_point_open_beneath(t.root, long_name, true, NULL), ENAMETOOLONG);
        ASSERT_ERROR(mount_point_open_beneath(-EBADF, "/a", true, NULL), EBADF);
        ASSERT_EQ(outside_entries(&t), 0);
        tree_free(&t);
}

DEFINE_TEST_MAIN
