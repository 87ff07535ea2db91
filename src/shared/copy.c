/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "copy.h"
#include "fd-util.h"
#include "macro.h"

typedef struct CopyContext {
        CopyFlags flags;
        const char *what;
        char *xattr_names; /* XATTR_LIST_MAX bytes, with COPY_XATTRS */
        char *xattr_value; /* XATTR_SIZE_MAX bytes, with COPY_XATTRS */
} CopyContext;

static int copy_fail(const CopyContext *c, HutchError *reterr, int r, const char *what,
                     const char *name) {
        return hutch_error_set(reterr, -r, "failed to %s '%s' while copying %s: %s", what, name,
                               c->what, strerror(-r));
}

int copy_file_data(int from, int to) {
        char buf[65536];

        /* A reflink shares the blocks copy-on-write: instant, and still an
         * independent file. Any failure (other filesystem, no support) falls
         * back to copying. */
        if (ioctl(to, FICLONE, from) == 0)
                return 0;
        for (;;) {
                ssize_t n = copy_file_range(from, NULL, to, NULL, SIZE_MAX >> 2, 0);

                if (n == 0)
                        return 0;
                if (n > 0)
                        continue;
                if (errno == EINTR)
                        continue;
                if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
                        return negative_errno();
                break;
        }
        for (;;) {
                ssize_t n = read(from, buf, sizeof(buf));
                int r;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return 0;
                r = loop_write(to, buf, (size_t)n);
                if (r < 0)
                        return r;
        }
}

/* Copies the user.* extended attributes of @from onto @to. */
static int copy_xattrs(const CopyContext *c, int from, int to, const char *name,
                       HutchError *reterr) {
        ssize_t n;

        if (!(c->flags & COPY_XATTRS))
                return 0;
        n = flistxattr(from, c->xattr_names, XATTR_LIST_MAX);
        if (n < 0) {
                if (errno == ENOTSUP)
                        return 0;
                return copy_fail(c, reterr, negative_errno(), "list extended attributes of", name);
        }
        for (const char *p = c->xattr_names; p < c->xattr_names + n; p += strlen(p) + 1) {
                ssize_t v;

                if (strncmp(p, "user.", 5) != 0)
                        continue;
                v = fgetxattr(from, p, c->xattr_value, XATTR_SIZE_MAX);
                if (v < 0 && errno == ENODATA)
                        continue; /* removed since it was listed */
                if (v < 0)
                        return copy_fail(c, reterr, negative_errno(), "read extended attributes of",
                                         name);
                if (fsetxattr(to, p, c->xattr_value, (size_t)v, 0) < 0)
                        return copy_fail(c, reterr, negative_errno(), "set extended attributes of",
                                         name);
        }
        return 0;
}

/* Gives the new entry @name in @dst_dirfd (or the open @fd of it, when >= 0)
 * the owner, mode and times of @st. */
static int copy_metadata(const CopyContext *c, int dst_dirfd, const char *name, int fd,
                         const struct stat *st, HutchError *reterr) {
        struct timespec times[2] = {st->st_atim, st->st_mtim};
        /* Keep the mode exactly (umask must not narrow it), minus setuid/setgid. */
        mode_t mode = st->st_mode & 01777;
        struct stat now;
        int r;

        if (c->flags & COPY_OWNERSHIP) {
                r = fd >= 0 ? fstat(fd, &now) : fstatat(dst_dirfd, name, &now, AT_SYMLINK_NOFOLLOW);
                if (r < 0)
                        return copy_fail(c, reterr, negative_errno(), "inspect", name);
                if (now.st_uid != st->st_uid || now.st_gid != st->st_gid) {
                        r = fd >= 0 ? fchown(fd, st->st_uid, st->st_gid)
                                    : fchownat(dst_dirfd, name, st->st_uid, st->st_gid,
                                               AT_SYMLINK_NOFOLLOW);
                        if (r < 0)
                                return copy_fail(c, reterr, negative_errno(), "chown", name);
                }
        }
        /* A symlink has no mode of its own. The others without an fd (FIFOs,
         * whiteouts) were created by this copy in the destination, which is
         * not shared with anyone while it is being filled. */
        if (!S_ISLNK(st->st_mode)) {
                r = fd >= 0 ? fchmod(fd, mode) : fchmodat(dst_dirfd, name, mode, 0);
                if (r < 0)
                        return copy_fail(c, reterr, negative_errno(), "chmod", name);
        }
        if (fd >= 0)
                (void)futimens(fd, times);
        else
                (void)utimensat(dst_dirfd, name, times, AT_SYMLINK_NOFOLLOW);
        return 0;
}

static int copy_regular(const CopyContext *c, int src_dirfd, int dst_dirfd, const char *name,
                        const struct stat *st, HutchError *reterr) {
        _cleanup_close_ int from = -EBADF, to = -EBADF;
        int r;

        from = open_regular_at(src_dirfd, name, st);
        if (from == -ESTALE)
                return copy_fail(c, reterr, from, "copy (it changed while being copied)", name);
        if (from < 0)
                return copy_fail(c, reterr, from, "open", name);
        /* Owner-only until the data, xattrs and owner are in place. */
        to = openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (to < 0)
                return copy_fail(c, reterr, negative_errno(), "create", name);
        r = copy_file_data(from, to);
        if (r < 0)
                return copy_fail(c, reterr, r, "copy", name);
        r = copy_xattrs(c, from, to, name, reterr);
        if (r < 0)
                return r;
        return copy_metadata(c, dst_dirfd, name, to, st, reterr);
}

static int copy_dir_at(const CopyContext *c, int src_dirfd, int dst_dirfd, unsigned depth,
                       HutchError *reterr);

static int copy_subdir(const CopyContext *c, int src_dirfd, int dst_dirfd, const char *name,
                       const struct stat *st, unsigned depth, HutchError *reterr) {
        _cleanup_close_ int s = -EBADF, t = -EBADF;
        int r;

        if (mkdirat(dst_dirfd, name, 0700) < 0)
                return copy_fail(c, reterr, negative_errno(), "create", name);
        s = open_directory_at(src_dirfd, name, st);
        if (s == -ESTALE)
                return copy_fail(c, reterr, s, "copy (it changed while being copied)", name);
        if (s < 0)
                return copy_fail(c, reterr, s, "open", name);
        t = openat(dst_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (t < 0)
                return copy_fail(c, reterr, negative_errno(), "open", name);
        r = copy_dir_at(c, s, t, depth + 1, reterr);
        if (r < 0)
                return r;
        r = copy_xattrs(c, s, t, name, reterr);
        if (r < 0)
                return r;
        return copy_metadata(c, dst_dirfd, name, t, st, reterr);
}

static int copy_entry(const CopyContext *c, int src_dirfd, int dst_dirfd, const char *name,
                      unsigned depth, HutchError *reterr) {
        struct stat st;

        if (fstatat(src_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return copy_fail(c, reterr, negative_errno(), "inspect", name);

        if (S_ISREG(st.st_mode))
                return copy_regular(c, src_dirfd, dst_dirfd, name, &st, reterr);
        if (S_ISDIR(st.st_mode))
                return copy_subdir(c, src_dirfd, dst_dirfd, name, &st, depth, reterr);
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(src_dirfd, name, target, sizeof(target) - 1);

                if (n < 0)
                        return copy_fail(c, reterr, negative_errno(), "read symlink", name);
                target[n] = '\0';
                if (symlinkat(target, dst_dirfd, name) < 0)
                        return copy_fail(c, reterr, negative_errno(), "create symlink", name);
        } else if (S_ISFIFO(st.st_mode)) {
                if (mkfifoat(dst_dirfd, name, 0600) < 0)
                        return copy_fail(c, reterr, negative_errno(), "create fifo", name);
        } else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0) &&
                   (c->flags & COPY_WHITEOUTS)) {
                if (mknodat(dst_dirfd, name, S_IFCHR | 0600, makedev(0, 0)) < 0)
                        return copy_fail(c, reterr, negative_errno(), "create whiteout", name);
        } else
                /* Other device nodes and sockets are not copied: they cannot
                 * be created in the sandbox and carry no data. */
                return 0;
        return copy_metadata(c, dst_dirfd, name, -EBADF, &st, reterr);
}

static int copy_dir_at(const CopyContext *c, int src_dirfd, int dst_dirfd, unsigned depth,
                       HutchError *reterr) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        if (depth > COPY_MAX_DEPTH)
                return hutch_error_set(reterr, ELOOP, "%s is nested deeper than %d directories",
                                       c->what, COPY_MAX_DEPTH);
        r = opendir_fd(src_dirfd, &d);
        if (r < 0)
                return copy_fail(c, reterr, r, "read", ".");
        while ((de = readdir_no_dot(d))) {
                r = copy_entry(c, src_dirfd, dst_dirfd, de->d_name, depth, reterr);
                if (r < 0)
                        return r;
        }
        if (errno != 0)
                return copy_fail(c, reterr, negative_errno(), "read", ".");
        return 0;
}

int copy_tree_full(int src_dirfd, int dst_dirfd, const CopyOptions *opts, HutchError *reterr) {
        _cleanup_free_ char *names = NULL, *value = NULL;
        CopyContext c = {
                .flags = opts->flags,
                .what = opts->what ? opts->what : "the tree",
        };
        struct stat st;
        int r;

        if (c.flags & COPY_XATTRS) {
                names = malloc(XATTR_LIST_MAX);
                value = malloc(XATTR_SIZE_MAX);
                if (!names || !value)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                c.xattr_names = names;
                c.xattr_value = value;
        }
        r = copy_dir_at(&c, src_dirfd, dst_dirfd, 0, reterr);
        if (r < 0 || !(c.flags & COPY_ROOT))
                return r;
        if (fstat(src_dirfd, &st) < 0)
                return copy_fail(&c, reterr, negative_errno(), "inspect", ".");
        r = copy_xattrs(&c, src_dirfd, dst_dirfd, ".", reterr);
        if (r < 0)
                return r;
        return copy_metadata(&c, AT_FDCWD, ".", dst_dirfd, &st, reterr);
}

int copy_tree(int src_dirfd, int dst_dirfd, HutchError *reterr) {
        return copy_tree_full(src_dirfd, dst_dirfd, &(CopyOptions){.what = "the workspace"},
                              reterr);
}
