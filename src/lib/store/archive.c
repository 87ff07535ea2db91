/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "store/archive-internal.h"
#include "store/layers.h"

/* What export and import share (archive-internal.h), and
 * snapshot_archive_clear(). */

int snapshot_archive_sha256_hex(EVP_MD_CTX *md, char hex[static SHA256_HEX_LEN + 1]) {
        static const char digits[] = "0123456789abcdef";
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned n = 0;

        if (EVP_DigestFinal_ex(md, d, &n) != 1 || n * 2 != SHA256_HEX_LEN)
                return -EIO;
        for (unsigned i = 0; i < n; i++) {
                hex[2 * i] = digits[d[i] >> 4];
                hex[2 * i + 1] = digits[d[i] & 15];
        }
        hex[SHA256_HEX_LEN] = '\0';
        return EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : -EIO;
}

int snapshot_archive_path_check(const char *path, const char **ret_why, unsigned *ret_n) {
        unsigned n = 0;

        if (path[0] == '\0') {
                *ret_why = "an empty path";
                return -EINVAL;
        }
        if (path[0] == '/') {
                *ret_why = "an absolute path";
                return -EPERM;
        }
        for (const char *p = path;;) {
                size_t len = strcspn(p, "/");

                if (len == 2 && p[0] == '.' && p[1] == '.') {
                        *ret_why = "a '..' component";
                        return -EPERM;
                }
                if (len == 0) {
                        *ret_why = "an empty component";
                        return -EINVAL;
                }
                if (len == 1 && p[0] == '.') {
                        *ret_why = "a '.' component";
                        return -EINVAL;
                }
                if (len > NAME_MAX) {
                        *ret_why = "a component longer than NAME_MAX";
                        return -ENAMETOOLONG;
                }
                n++;
                if (p[len] == '\0')
                        break;
                p += len + 1;
        }
        *ret_n = n;
        return 0;
}

int snapshot_archive_relpath_check(const char *rel, const char **ret_why) {
        unsigned n;
        int r;

        r = snapshot_archive_path_check(rel, ret_why, &n);
        if (r < 0)
                return r;
        if (strlen(rel) > SNAPSHOT_ARCHIVE_PATH_MAX) {
                *ret_why = "a path longer than SNAPSHOT_ARCHIVE_PATH_MAX";
                return -ENAMETOOLONG;
        }
        if (n > SNAPSHOT_ARCHIVE_DEPTH_MAX) {
                *ret_why = "a path deeper than SNAPSHOT_ARCHIVE_DEPTH_MAX";
                return -ELOOP;
        }
        return 0;
}

bool snapshot_archive_xattr_allowed(const char *name) {
        if (strncmp(name, USER_XATTR_PREFIX, strlen(USER_XATTR_PREFIX)) != 0)
                return false;
        if (strncmp(name, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) != 0)
                return true;
        return strcmp(name, LAYER_XATTR_OPAQUE) == 0 || strcmp(name, LAYER_XATTR_WHITEOUT) == 0;
}

bool snapshot_archive_symlink_is_contained(const char *rel, const char *target) {
        long depth = 0;

        if (target[0] == '\0' || strlen(target) >= PATH_MAX)
                return false;
        /* An absolute target is the sandbox's own path (a venv's
         * bin/python3 -> /usr/bin/python3): it starts at the sandbox's
         * root, whatever the link's place in the layer. A relative one
         * starts at the directory holding the link. */
        if (target[0] != '/')
                for (const char *p = rel; *p; p++)
                        if (*p == '/')
                                depth++; /* @depth: components of the directory holding the link */
        for (const char *p = target;;) {
                size_t len = strcspn(p, "/");

                if (len == 2 && p[0] == '.' && p[1] == '.') {
                        if (--depth < 0)
                                return false;
                } else if (len > 0 && !(len == 1 && p[0] == '.'))
                        depth++;
                if (p[len] == '\0')
                        return true;
                p += len + 1;
        }
}

void snapshot_names_done(SnapshotNames *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->names[i]);
        l->names = mfree(l->names);
        l->n = l->alloc = 0;
}

static int name_compare(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int snapshot_names_list(int dirfd, SnapshotNames *ret) {
        _cleanup_(snapshot_names_done) SnapshotNames l = {};
        _cleanup_(closedirp) DIR *d = NULL;
        int r;

        r = opendir_fd(dirfd, &d);
        if (r < 0)
                return r;
        for (;;) {
                struct dirent *de;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return negative_errno();
                        break;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (l.n >= SNAPSHOT_ARCHIVE_ENTRIES_MAX)
                        return -E2BIG;
                if (l.n == l.alloc) {
                        size_t alloc = l.alloc ? l.alloc * 2 : 16;
                        char **names = reallocarray(l.names, alloc, sizeof(char *));

                        if (!names)
                                return -ENOMEM;
                        l.names = names;
                        l.alloc = alloc;
                }
                l.names[l.n] = strdup(de->d_name);
                if (!l.names[l.n])
                        return -ENOMEM;
                l.n++;
        }
        if (l.n > 1)
                qsort(l.names, l.n, sizeof(char *), name_compare);
        *ret = l;
        l = (SnapshotNames){};
        return 0;
}

/* Removes what is below the directory @dirfd, @depth levels below the
 * directory snapshot_archive_clear() was given. */
static int clear_at(int dirfd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct stat st;
        int r;

        if (depth > SNAPSHOT_ARCHIVE_DEPTH_MAX + 2)
                return -ELOOP;
        if (fstat(dirfd, &st) < 0)
                return negative_errno();
        r = opendir_fd(dirfd, &d);
        if (r < 0)
                return r;
        for (;;) {
                _cleanup_close_ int sub = -EBADF;
                struct dirent *de;
                struct stat sub_st;

                errno = 0;
                de = readdir(d);
                if (!de)
                        return errno != 0 ? negative_errno() : 0;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (unlinkat(dirfd, de->d_name, 0) >= 0 || errno == ENOENT)
                        continue;
                if (errno != EISDIR)
                        return negative_errno();
                sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        return negative_errno();
                if (fstat(sub, &sub_st) < 0)
                        return negative_errno();
                if (sub_st.st_dev != st.st_dev)
                        return -EXDEV;
                /* An unprivileged caller needs write and search permission
                 * to empty it; as the owner it can grant them. */
                (void)fchmod(sub, (sub_st.st_mode & 07777) | 0700);
                r = clear_at(sub, depth + 1);
                if (r < 0)
                        return r;
                if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0)
                        return negative_errno();
        }
}

int snapshot_archive_clear(int dirfd) {
        if (dirfd < 0)
                return -EINVAL;
        return clear_at(dirfd, 0);
}
