/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "store/disk-image.h"
#include "time-util.h"

/* How often a loop device that another process took between
 * LOOP_CTL_GET_FREE and LOOP_CONFIGURE is replaced by the next free one. */
#define LOOP_ATTEMPTS 16
#define MKFS_ERROR_MAX 512
#define DISK_IMAGE_POLL_MS 5

static const char *mkfs_find(void) {
        static const char *const paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};

        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (access(paths[i], X_OK) == 0)
                        return paths[i];
        return NULL;
}

static bool kernel_has_ext4(void) {
        FILE *f = fopen("/proc/filesystems", "re");
        char line[128];
        bool found = false;

        while (f && !found && fgets(line, sizeof(line), f))
                found = strcmp(line, "\text4\n") == 0;
        if (f)
                (void)fclose(f);
        return found;
}

int disk_image_supported(HutchError *reterr) {
        if (geteuid() != 0)
                return hutch_error_set(reterr, EPERM,
                                       "an unprivileged user cannot mount a file system image (the "
                                       "kernel lets only root mount ext4 and set up loop devices); "
                                       "run hutch as root to have it enforced");
        if (access("/dev/loop-control", R_OK | W_OK) < 0)
                return hutch_error_set(reterr, ENODEV,
                                       "/dev/loop-control is missing (%m): load the loop module "
                                       "(modprobe loop)");
        if (!kernel_has_ext4())
                return hutch_error_set(reterr, ENODEV,
                                       "the kernel has no ext4 file system (modprobe ext4)");
        if (!mkfs_find())
                return hutch_error_set(reterr, ENOENT,
                                       "mkfs.ext4 is not installed (install e2fsprogs)");
        return 0;
}

int disk_image_make(const char *image, uint64_t size, const char *src, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF, err_fd = -EBADF, null_fd = -EBADF;
        char *const envp[] = {"LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        const char *mkfs = mkfs_find();
        char msg[MKFS_ERROR_MAX];
        int status;
        ssize_t n;
        pid_t pid;

        if (!mkfs)
                return hutch_error_set(reterr, ENOENT,
                                       "mkfs.ext4 is not installed (install e2fsprogs)");
        if (size < DISK_IMAGE_MIN_SIZE || size > DISK_IMAGE_MAX_SIZE)
                return hutch_error_set(reterr, EINVAL,
                                       "a disk limit must be between 16m and 16t (got %llu bytes)",
                                       (unsigned long long)size);
        fd = open(image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", image);
        if (ftruncate(fd, (off_t)size) < 0)
                return hutch_error_set(reterr, errno, "cannot size %s: %m", image);
        fd = safe_close(fd);
        err_fd = memfd_create("mkfs-error", MFD_CLOEXEC);
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (err_fd < 0 || null_fd < 0)
                return hutch_error_set(reterr, errno, "cannot run mkfs.ext4: %m");
        pid = fork();
        if (pid < 0)
                return hutch_error_set(reterr, errno, "cannot run mkfs.ext4: %m");
        if (pid == 0) {
                /* -m 0: the reserve is for the host's root, which never
                 * writes there. Lazy inode tables and journal: the image
                 * stays sparse (the mount says noinit_itable). No
                 * resize_inode: it is never grown online, and its
                 * reserved blocks would take 4 MiB of the host's disk. */
                const char *argv[] = {mkfs,
                                      "-q",
                                      "-F",
                                      "-m",
                                      "0",
                                      "-O",
                                      "^resize_inode",
                                      "-E",
                                      "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                                      "-d",
                                      src,
                                      image,
                                      NULL};

                if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(null_fd, STDOUT_FILENO) < 0 ||
                    dup2(err_fd, STDERR_FILENO) < 0)
                        _exit(127);
                (void)execve(mkfs, (char *const *)argv, envp);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return hutch_error_set(reterr, errno, "cannot wait for mkfs.ext4: %m");
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        n = pread(err_fd, msg, sizeof(msg) - 1, 0);
        msg[n > 0 ? n : 0] = '\0';
        msg[strcspn(msg, "\n")] = '\0';
        return hutch_error_set(reterr, EIO, "mkfs.ext4 failed to make %s: %s", image,
                               msg[0] ? msg : "no message");
}

/* Copies [@start, @end) of @in to the same offsets of @out. */
static int copy_range(int in, int out, off_t start, off_t end) {
        off_t from = start, to = start;

        while (from < end) {
                ssize_t n = copy_file_range(in, &from, out, &to, (size_t)(end - from), 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        return -EIO; /* the template shrank under us */
        }
        return 0;
}

int disk_image_copy(const char *template, const char *image, HutchError *reterr) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        struct stat st;
        off_t data = 0, hole;
        int r;

        in = open(template, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (in < 0)
                return hutch_error_set(reterr, errno, "cannot open %s: %m", template);
        if (fstat(in, &st) < 0)
                return hutch_error_set(reterr, errno, "cannot stat %s: %m", template);
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < DISK_IMAGE_MIN_SIZE ||
            (uint64_t)st.st_size > DISK_IMAGE_MAX_SIZE)
                return hutch_error_set(reterr, EINVAL, "%s is not a disk image", template);
        out = open(image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", image);
        if (ftruncate(out, st.st_size) < 0)
                return hutch_error_set(reterr, errno, "cannot size %s: %m", image);
        for (;;) {
                data = lseek(in, data, SEEK_DATA);
                if (data < 0 && errno == ENXIO)
                        break; /* only a hole left */
                if (data < 0)
                        return hutch_error_set(reterr, errno, "cannot read %s: %m", template);
                hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0)
                        return hutch_error_set(reterr, errno, "cannot read %s: %m", template);
                r = copy_range(in, out, data, hole);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot copy %s to %s: %s", template,
                                               image, strerror(-r));
                data = hole;
        }
        if (fdatasync(out) < 0)
                return hutch_error_set(reterr, errno, "cannot write %s: %m", image);
        return 0;
}

/* Configures a free loop device over @image_fd (autoclear): its fd, with
 * its path in @dev. */
static int loop_attach(int image_fd, bool read_only, char *dev, size_t dev_size) {
        _cleanup_close_ int ctl = -EBADF;
        struct loop_config cfg = {
                .fd = (uint32_t)image_fd,
                .info = {.lo_flags = LO_FLAGS_AUTOCLEAR | (read_only ? LO_FLAGS_READ_ONLY : 0)},
        };

        ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return negative_errno();
        for (unsigned attempt = 0; attempt < LOOP_ATTEMPTS; attempt++) {
                int n, fd;

                n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return negative_errno();
                (void)snprintf(dev, dev_size, "/dev/loop%d", n);
                fd = open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
                if (fd < 0)
                        return negative_errno();
                if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
                        return fd;
                (void)close(fd);
                if (errno != EBUSY)
                        return negative_errno();
                /* Taken by someone else since GET_FREE: the next one. */
        }
        return -EBUSY;
}

int disk_image_mount(const char *image, bool read_only, int *ret_mnt_fd, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF, loop = -EBADF, fs = -EBADF;
        char dev[32];
        struct stat st;
        int mnt;

        fd = open(image, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot open the disk image %s: %m", image);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return hutch_error_set(reterr, EINVAL, "%s is not a regular file", image);
        /* SECURITY: see the header; the lock goes with this open file
         * into the loop device, and is released only when it lets go. */
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return hutch_error_set(reterr, errno == EWOULDBLOCK ? EBUSY : errno,
                                       "the disk image %s is in use", image);
        loop = loop_attach(fd, read_only, dev, sizeof(dev));
        if (loop < 0)
                return hutch_error_set(reterr, -loop, "cannot set up a loop device for %s: %s",
                                       image, strerror(-loop));
        fs = fsopen("ext4", FSOPEN_CLOEXEC);
        if (fs < 0)
                return hutch_error_set(reterr, errno, "cannot mount %s: fsopen: %m", image);
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
            (read_only && fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0) ||
            /* A deleted file's blocks go back to the host (the loop
             * device punches holes): the image's allocated blocks, which
             * `hutch ls` shows as its disk use, follow what it holds. */
            (!read_only && fsconfig(fs, FSCONFIG_SET_FLAG, "discard", NULL, 0) < 0) ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return hutch_error_set(reterr, errno, "cannot mount %s (%s): %m", image, dev);
        mnt = fsmount(fs, FSMOUNT_CLOEXEC,
                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0));
        if (mnt < 0)
                return hutch_error_set(reterr, errno, "cannot mount %s (%s): %m", image, dev);
        /* Closing @loop now leaves the file system as the loop device's
         * only user: autoclear detaches it when the mount goes. */
        *ret_mnt_fd = mnt;
        return 0;
}

int disk_image_mount_at(const char *image, const char *target, HutchError *reterr) {
        _cleanup_close_ int mnt = -EBADF;
        int r;

        r = disk_image_mount(image, false, &mnt, reterr);
        if (r < 0)
                return r;
        if (move_mount(mnt, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return hutch_error_set(reterr, errno, "cannot mount %s on %s: %m", image, target);
        return 0;
}

int disk_image_wait_free(const char *image, unsigned timeout_ms) {
        _cleanup_close_ int fd = -EBADF;

        fd = open(image, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        /* The release usually follows within a millisecond of the
         * keeper's exit (a stop waits right after it): the first looks
         * come soon, then every DISK_IMAGE_POLL_MS (issue 20). */
        for (uint64_t start = time_monotonic_us(), pause_us = 200;;
             pause_us = MIN(pause_us * 2, (uint64_t)DISK_IMAGE_POLL_MS * 1000)) {
                if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
                        (void)flock(fd, LOCK_UN);
                        return 0;
                }
                if (errno != EWOULDBLOCK && errno != EINTR)
                        return negative_errno();
                if (time_monotonic_us() - start >= (uint64_t)timeout_ms * 1000)
                        return -EBUSY;
                (void)usleep((useconds_t)pause_us);
        }
}
