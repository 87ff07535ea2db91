/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

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

int mkdir_parents(const char *path, mode_t mode) {
        char buf[4096];
        size_t len = strlen(path);

        if (len == 0 || len >= sizeof(buf))
                return -ENAMETOOLONG;
        memcpy(buf, path, len + 1);
        for (char *p = buf + 1;; p++) {
                char saved = *p;
                struct stat st;

                if (saved != '/' && saved != '\0')
                        continue;
                *p = '\0';
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return negative_errno();
                if (stat(buf, &st) < 0)
                        return negative_errno();
                if (!S_ISDIR(st.st_mode))
                        return -ENOTDIR;
                *p = saved;
                if (saved == '\0')
                        break;
        }
        return 0;
}

int touch_mount_point(const char *path) {
        char parent[4096];
        const char *slash = strrchr(path, '/');
        int fd, r;

        if (!slash || (size_t)(slash - path) >= sizeof(parent))
                return -EINVAL;
        if (slash != path) {
                memcpy(parent, path, (size_t)(slash - path));
                parent[slash - path] = '\0';
                r = mkdir_parents(parent, 0755);
                if (r < 0)
                        return r;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0444);
        if (fd < 0) {
                if (errno == EEXIST || errno == EISDIR)
                        return 0;
                /* An existing file on a read-only mount is still a usable mount point. */
                if (errno == EROFS && access(path, F_OK) == 0)
                        return 0;
                return negative_errno();
        }
        (void)close(fd);
        return 0;
}
