/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "copy.h"
#include "fd-util.h"
#include "macro.h"
#include "store/layers.h"

int layer_copy(int src_dirfd, int dst_dirfd, HutchError *reterr) {
        const CopyOptions opts = {
                .flags = COPY_XATTRS | COPY_OWNERSHIP | COPY_WHITEOUTS | COPY_ROOT,
                .what = "the layer",
        };

        return copy_tree_full(src_dirfd, dst_dirfd, &opts, reterr);
}

int layer_entry_is_whiteout(int dirfd, const char *name, const struct stat *st) {
        _cleanup_close_ int fd = -EBADF;

        if (S_ISCHR(st->st_mode))
                return st->st_rdev == makedev(0, 0);
        if (!S_ISREG(st->st_mode) || st->st_size != 0)
                return 0;
        fd = open_regular_at(dirfd, name, st);
        if (fd < 0)
                return fd;
        if (fgetxattr(fd, LAYER_XATTR_WHITEOUT, NULL, 0) >= 0)
                return 1;
        if (errno == ENODATA || errno == ENOTSUP)
                return 0;
        return negative_errno();
}

int layer_dir_is_opaque(int dirfd) {
        char v[2];
        ssize_t n = fgetxattr(dirfd, LAYER_XATTR_OPAQUE, v, sizeof(v));

        if (n < 0) {
                /* ERANGE: longer than one byte, so not "y". */
                if (errno == ENODATA || errno == ENOTSUP || errno == ERANGE)
                        return 0;
                return negative_errno();
        }
        return n == 1 && v[0] == 'y';
}
