/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/mount-util.h"

int mount_tmpfs(const char *path, uint64_t size, mode_t mode, unsigned long flags) {
        char opts[64];

        if (size > 0)
                (void)snprintf(opts, sizeof(opts), "mode=%04o,size=%llu", (unsigned)mode,
                               (unsigned long long)size);
        else
                (void)snprintf(opts, sizeof(opts), "mode=%04o", (unsigned)mode);
        if (mount("tmpfs", path, "tmpfs", flags, opts) < 0)
                return negative_errno();
        return 0;
}

int mount_bind(const char *source, const char *target) {
        if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) < 0)
                return negative_errno();
        return 0;
}

int mount_set_attr(const char *path, uint64_t attr_set, bool recursive) {
        struct mount_attr attr = {.attr_set = attr_set};

        if (mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof(attr)) < 0)
                return negative_errno();
        return 0;
}

/* Opens (creating it when missing) the component @name of the directory
 * @dirfd: a directory unless @file. */
static int component_open(int dirfd, const char *name, bool file) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        for (unsigned tries = 0; tries < 2; tries++) {
                int r;

                fd = openat_beneath(dirfd, name, O_PATH | (file ? 0 : O_DIRECTORY), 0);
                if (fd != -ENOENT)
                        break;
                /* Neither call follows a symlink that appeared in between:
                 * mkdirat() and O_CREAT|O_EXCL fail with EEXIST on one, and
                 * the open that follows refuses it. */
                if (file)
                        r = openat(dirfd, name,
                                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                                   0444);
                else
                        r = mkdirat(dirfd, name, 0755);
                if (r < 0 && errno != EEXIST)
                        return negative_errno();
                if (file && r >= 0)
                        (void)close(r);
        }
        if (fd < 0 || !file)
                return TAKE_FD(fd);
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        return TAKE_FD(fd);
}

int mount_point_open_beneath(int root_fd, const char *path, bool dir, size_t *reterr_len) {
        _cleanup_close_ int cur = -EBADF;
        const char *p = path;
        int r;

        if (!path || path[0] != '/')
                return -EINVAL;
        cur = openat_beneath(root_fd, ".", O_PATH | O_DIRECTORY, 0);
        if (cur < 0)
                return cur;
        while (*p == '/')
                p++;
        if (*p == '\0')
                return -EINVAL;
        while (*p != '\0') {
                char name[NAME_MAX + 1];
                size_t len = strcspn(p, "/");
                const char *next = p + len;
                int fd;

                while (*next == '/')
                        next++;
                if (len > NAME_MAX)
                        r = -ENAMETOOLONG;
                else if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
                        r = -EINVAL;
                else {
                        memcpy(name, p, len);
                        name[len] = '\0';
                        r = fd = component_open(cur, name, !dir && *next == '\0');
                }
                if (r < 0) {
                        if (reterr_len)
                                *reterr_len = (size_t)(p - path) + len;
                        return r;
                }
                (void)close(cur);
                cur = fd;
                p = next;
        }
        return TAKE_FD(cur);
}

int mount_tmpfs_at(int target_fd, uint64_t size, mode_t mode, uint64_t attr) {
        _cleanup_close_ int fs = -EBADF, mnt = -EBADF;
        char value[32];

        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return negative_errno();
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", "tmpfs", 0) < 0)
                return negative_errno();
        (void)snprintf(value, sizeof(value), "%04o", (unsigned)mode);
        if (fsconfig(fs, FSCONFIG_SET_STRING, "mode", value, 0) < 0)
                return negative_errno();
        if (size > 0) {
                (void)snprintf(value, sizeof(value), "%llu", (unsigned long long)size);
                if (fsconfig(fs, FSCONFIG_SET_STRING, "size", value, 0) < 0)
                        return negative_errno();
        }
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return negative_errno();
        mnt = fsmount(fs, FSMOUNT_CLOEXEC, (unsigned)attr);
        if (mnt < 0)
                return negative_errno();
        return mount_move_to(mnt, target_fd);
}

int mount_move_to(int tree_fd, int target_fd) {
        if (move_mount(tree_fd, "", target_fd, "",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return negative_errno();
        return 0;
}

int mount_set_attr_fd(int fd, uint64_t attr_set, bool recursive) {
        struct mount_attr attr = {.attr_set = attr_set};

        if (mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
                          sizeof(attr)) < 0)
                return negative_errno();
        return 0;
}
