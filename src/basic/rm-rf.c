/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "rm-rf.h"

static int rm_rf_children(int dfd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        if (depth > RM_RF_MAX_DEPTH)
                return -ELOOP;
        d = fdopendir(dfd);
        if (!d) {
                r = negative_errno();
                (void)close(dfd);
                return r;
        }
        while ((errno = 0, de = readdir(d))) {
                int q, child;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) == 0 || errno == ENOENT)
                        continue;
                if (errno != EISDIR) {
                        if (r == 0)
                                r = negative_errno();
                        continue;
                }
                /* SECURITY: O_NOFOLLOW | O_DIRECTORY: a symlink is
                 * unlinked above, never entered. */
                child = openat(dirfd(d), de->d_name,
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                /* overlayfs leaves its work/work directory mode 000. */
                if (child < 0 && errno == EACCES &&
                    fchmodat(dirfd(d), de->d_name, 0700, AT_SYMLINK_NOFOLLOW) >= 0)
                        child = openat(dirfd(d), de->d_name,
                                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (child < 0) {
                        if (r == 0)
                                r = negative_errno();
                        continue;
                }
                q = rm_rf_children(child, depth + 1);
                if (q < 0 && r == 0)
                        r = q;
                if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                        r = negative_errno();
        }
        return r;
}

int rm_rf_at(int dirfd, const char *name) {
        int fd, r;

        if (unlinkat(dirfd, name, 0) == 0)
                return 0;
        if (errno == ENOENT)
                return 0;
        if (errno != EISDIR)
                return negative_errno();
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        r = rm_rf_children(fd, 0);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = negative_errno();
        return r;
}
