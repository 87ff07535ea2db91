/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* store/disk-image.h: the errors it returns before anything is mounted
 * (mounting needs root: tests/integration/test_persistent_disk.py). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "rm-rf.h"
#include "store/disk-image.h"
#include "test.h"

static char *tmp_dir(void) {
        char *p = strdup("/tmp/hutch-test-disk-XXXXXX");

        ASSERT_NOT_NULL(p);
        ASSERT_NOT_NULL(mkdtemp(p));
        return p;
}

static char *path_in(const char *dir, const char *name) {
        char *p = NULL;

        ASSERT_TRUE(asprintf(&p, "%s/%s", dir, name) > 0);
        return p;
}

TEST(make_refuses_sizes_out_of_range_and_an_existing_image) {
        char *dir = tmp_dir(), *img = path_in(dir, "disk.img"), *src = path_in(dir, "src");
        HutchError e = {};

        ASSERT_OK(mkdir(src, 0700));
        ASSERT_ERROR(disk_image_make(img, DISK_IMAGE_MIN_SIZE - 1, src, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e.msg, "between 16m and 16t"));
        ASSERT_ERROR(disk_image_make(img, DISK_IMAGE_MAX_SIZE + 1, src, &e), EINVAL);
        ASSERT_TRUE(access(img, F_OK) < 0); /* nothing made */
        close(open(img, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        e = (HutchError){};
        ASSERT_ERROR(disk_image_make(img, DISK_IMAGE_MIN_SIZE, src, &e), EEXIST);
        ASSERT_NOT_NULL(strstr(e.msg, img));
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
        free(img);
        free(src);
        free(dir);
}

TEST(mount_refuses_a_missing_image_and_a_directory) {
        char *dir = tmp_dir(), *img = path_in(dir, "disk.img");
        HutchError e = {};
        int fd = -EBADF;

        ASSERT_ERROR(disk_image_mount(img, true, &fd, &e), ENOENT);
        ASSERT_EQ(fd, -EBADF);
        ASSERT_OK(mkdir(img, 0700));
        e = (HutchError){};
        /* O_RDONLY opens a directory: it is refused as not a regular file. */
        ASSERT_ERROR(disk_image_mount(img, true, &fd, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e.msg, "not a regular file"));
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
        free(img);
        free(dir);
}

TEST(mount_refuses_an_image_in_use) {
        char *dir = tmp_dir(), *img = path_in(dir, "disk.img");
        HutchError e = {};
        int holder, fd = -EBADF;

        /* The flock a loop device would hold (disk-image.h). */
        holder = open(img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(holder >= 0);
        ASSERT_OK(flock(holder, LOCK_EX));
        ASSERT_ERROR(disk_image_mount(img, false, &fd, &e), EBUSY);
        ASSERT_NOT_NULL(strstr(e.msg, "in use"));
        ASSERT_ERROR(disk_image_wait_free(img, 20), EBUSY);
        close(holder);
        ASSERT_OK(disk_image_wait_free(img, 20));
        ASSERT_OK(disk_image_wait_free("/nonexistent/disk.img", 0));
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
        free(img);
        free(dir);
}

TEST(copy_keeps_the_data_and_the_holes) {
        char *dir = tmp_dir(), *tpl = path_in(dir, "tpl.img"), *img = path_in(dir, "disk.img");
        char buf[8] = {}, zero[8] = {};
        HutchError e = {};
        struct stat st;
        int fd;

        /* 16 MiB with data at its start, in its middle and at its end. */
        fd = open(tpl, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(ftruncate(fd, (off_t)DISK_IMAGE_MIN_SIZE));
        ASSERT_EQ(pwrite(fd, "head", 4, 0), 4);
        ASSERT_EQ(pwrite(fd, "middle", 6, 8 << 20), 6);
        ASSERT_EQ(pwrite(fd, "tail", 4, (off_t)DISK_IMAGE_MIN_SIZE - 4), 4);
        close(fd);
        ASSERT_OK(disk_image_copy(tpl, img, &e));
        fd = open(img, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(fstat(fd, &st));
        ASSERT_EQ((uint64_t)st.st_size, DISK_IMAGE_MIN_SIZE);
        ASSERT_EQ(st.st_mode & 0777, 0600U);
        /* Sparse: the holes were not written (a few blocks, not 16 MiB). */
        ASSERT_TRUE((uint64_t)st.st_blocks * 512 < (1U << 20));
        ASSERT_EQ(pread(fd, buf, 4, 0), 4);
        ASSERT_EQ(memcmp(buf, "head", 4), 0);
        ASSERT_EQ(pread(fd, buf, 6, 8 << 20), 6);
        ASSERT_EQ(memcmp(buf, "middle", 6), 0);
        ASSERT_EQ(pread(fd, buf, 4, (off_t)DISK_IMAGE_MIN_SIZE - 4), 4);
        ASSERT_EQ(memcmp(buf, "tail", 4), 0);
        ASSERT_EQ(pread(fd, buf, 8, 4 << 20), 8);
        ASSERT_EQ(memcmp(buf, zero, 8), 0);
        close(fd);
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
        free(tpl);
        free(img);
        free(dir);
}

TEST(copy_refuses_a_missing_or_small_template_and_an_existing_image) {
        char *dir = tmp_dir(), *tpl = path_in(dir, "tpl.img"), *img = path_in(dir, "disk.img");
        HutchError e = {};
        int fd;

        ASSERT_ERROR(disk_image_copy(tpl, img, &e), ENOENT);
        ASSERT_NOT_NULL(strstr(e.msg, tpl));
        fd = open(tpl, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(ftruncate(fd, (off_t)DISK_IMAGE_MIN_SIZE - 1));
        e = (HutchError){};
        ASSERT_ERROR(disk_image_copy(tpl, img, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e.msg, "not a disk image"));
        ASSERT_TRUE(access(img, F_OK) < 0); /* nothing made */
        ASSERT_OK(ftruncate(fd, (off_t)DISK_IMAGE_MIN_SIZE));
        close(fd);
        close(open(img, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        e = (HutchError){};
        ASSERT_ERROR(disk_image_copy(tpl, img, &e), EEXIST);
        ASSERT_NOT_NULL(strstr(e.msg, img));
        /* A directory is no template. */
        ASSERT_OK(unlink(img));
        e = (HutchError){};
        ASSERT_ERROR(disk_image_copy(dir, img, &e), EINVAL);
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
        free(tpl);
        free(img);
        free(dir);
}

DEFINE_TEST_MAIN
