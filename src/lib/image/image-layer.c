/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "fd-util.h"
#include "image/image-layer.h"
#include "rm-rf.h"
#include "store/archive.h"
#include "store/layers.h"

/* image_layer_unpack() (image-layer.h): two libarchive readers in a chain.
 * The outer one reads the blob from the fd (hashing it: the blob digest)
 * and undoes the compression (format "raw"); the inner one reads the tar
 * from the outer one's data (hashing it: the diff id). */

#define BUF_SIZE (128u * 1024)
#define WHITEOUT_PREFIX ".wh."
#define OPAQUE_NAME ".wh..wh..opq"

DEFINE_VOID_CLEANUP(EVP_MD_CTX, EVP_MD_CTX_free)

static inline void archive_read_freep(struct archive **a) {
        if (*a)
                (void)archive_read_free(*a);
        *a = NULL;
}

typedef struct DirMeta {
        char *rel;
        mode_t mode;
        struct timespec mtime;
} DirMeta;

typedef struct Unpack {
        int blob_fd;
        int root_fd;
        ImageLayerOwners owners;
        int owners_fd;
        struct archive *outer, *inner;
        EVP_MD_CTX *blob_md, *tar_md;
        char *in_buf, *mid_buf, *buf;
        DirMeta *dirs;
        size_t n_dirs, n_dirs_alloc;
        ImageLayerResult res;
        HutchError *reterr;
} Unpack;

static void unpack_done(Unpack *u) {
        archive_read_freep(&u->inner);
        archive_read_freep(&u->outer);
        EVP_MD_CTX_freep(&u->blob_md);
        EVP_MD_CTX_freep(&u->tar_md);
        free(u->in_buf);
        free(u->mid_buf);
        free(u->buf);
        for (size_t i = 0; i < u->n_dirs; i++)
                free(u->dirs[i].rel);
        free(u->dirs);
}

static la_ssize_t outer_read_cb(struct archive *a, void *userdata, const void **ret_buf) {
        Unpack *u = userdata;
        ssize_t n;

        do
                n = read(u->blob_fd, u->in_buf, BUF_SIZE);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                archive_set_error(a, errno, "%s", strerror(errno));
                return -1;
        }
        if (n > 0 && EVP_DigestUpdate(u->blob_md, u->in_buf, (size_t)n) != 1) {
                archive_set_error(a, EIO, "SHA-256 failed");
                return -1;
        }
        u->res.blob_size += (uint64_t)n;
        *ret_buf = u->in_buf;
        return (la_ssize_t)n;
}

static la_ssize_t inner_read_cb(struct archive *a, void *userdata, const void **ret_buf) {
        Unpack *u = userdata;
        la_ssize_t n = archive_read_data(u->outer, u->mid_buf, BUF_SIZE);

        if (n < 0) {
                archive_set_error(a, archive_errno(u->outer) ?: EIO, "%s",
                                  archive_error_string(u->outer) ?: "decompression failed");
                return -1;
        }
        if (n > 0 && EVP_DigestUpdate(u->tar_md, u->mid_buf, (size_t)n) != 1) {
                archive_set_error(a, EIO, "SHA-256 failed");
                return -1;
        }
        u->res.tar_size += (uint64_t)n;
        *ret_buf = u->mid_buf;
        return n;
}

static int archive_fail(Unpack *u, struct archive *a) {
        int e = archive_errno(a);
        const char *s = archive_error_string(a) ?: "unknown error";

        if (e == ENOMEM || e == EIO || e == EBADF || e == EISDIR)
                return hutch_error_set(u->reterr, e, "failed to read the layer: %s", s);
        return hutch_error_set(u->reterr, EBADMSG, "the layer is corrupt or truncated: %s", s);
}

static int digest_final(EVP_MD_CTX *md, char out[static IMAGE_DIGEST_LEN + 1]) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned n = 0;

        if (EVP_DigestFinal_ex(md, d, &n) != 1 || n != 32)
                return -EIO;
        memcpy(out, IMAGE_DIGEST_PREFIX, 7);
        for (unsigned i = 0; i < n; i++)
                (void)snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
        return 0;
}

/* Strips "./" prefixes and a trailing '/' from @path into a new string;
 * "" is the layer's root. */
static int path_normalize(const char *path, char **ret) {
        char *s;
        size_t n;

        while (path[0] == '.' && path[1] == '/')
                for (path += 2; path[0] == '/';)
                        path++;
        if (strcmp(path, ".") == 0)
                path = "";
        s = strdup(path);
        if (!s)
                return -ENOMEM;
        n = strlen(s);
        while (n > 1 && s[n - 1] == '/')
                s[--n] = '\0';
        *ret = s;
        return 0;
}

static int entry_path(Unpack *u, const char *raw, const char *what, char **ret) {
        _cleanup_free_ char *rel = NULL;
        const char *why;
        int r;

        if (!raw)
                return hutch_error_set(u->reterr, EBADMSG, "a layer entry has no path");
        r = path_normalize(raw, &rel);
        if (r < 0)
                return r;
        if (rel[0]) {
                r = snapshot_archive_relpath_check(rel, &why);
                if (r < 0)
                        return hutch_error_set(u->reterr, -r, "layer %s has %s: '%.200s'", what,
                                               why, raw);
        }
        *ret = TAKE_PTR(rel);
        return 0;
}

/* Opens the directory @rel (below the root; "" the root), creating
 * missing components 0755 when @create. O_PATH. */
static int dir_open(Unpack *u, const char *rel, bool create) {
        _cleanup_close_ int cur = -EBADF;
        _cleanup_free_ char *copy = NULL;
        char *p, *save = NULL;
        int fd;

        fd = openat_beneath(u->root_fd, rel[0] ? rel : ".", O_PATH | O_DIRECTORY, 0);
        if (fd >= 0 || fd != -ENOENT || !create)
                return fd;
        copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        cur = openat_beneath(u->root_fd, ".", O_PATH | O_DIRECTORY, 0);
        if (cur < 0)
                return cur;
        for (p = strtok_r(copy, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
                int next = openat_beneath(cur, p, O_PATH | O_DIRECTORY, 0);

                if (next == -ENOENT) {
                        if (mkdirat(cur, p, 0755) < 0)
                                return negative_errno();
                        next = openat_beneath(cur, p, O_PATH | O_DIRECTORY, 0);
                }
                if (next < 0)
                        return next;
                (void)close(cur);
                cur = next;
        }
        return TAKE_FD(cur);
}

/* Removes what is at @name in @pfd, if anything (a later entry replaces an
 * earlier one). Keeps a directory when @keep_dir. Returns 1 when a
 * directory was kept. */
static int replace_prepare(int pfd, const char *name, bool keep_dir) {
        struct stat st;

        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (S_ISDIR(st.st_mode)) {
                if (keep_dir)
                        return 1;
                return rm_rf_at(pfd, name);
        }
        return unlinkat(pfd, name, 0) < 0 ? negative_errno() : 0;
}

static int owners_record(Unpack *u, struct archive_entry *e, const char *rel) {
        char ids[32];
        int n;

        if (u->owners != IMAGE_LAYER_OWNERS_CALLER || u->owners_fd < 0)
                return 0;
        if (archive_entry_uid(e) == 0 && archive_entry_gid(e) == 0)
                return 0;
        n = snprintf(ids, sizeof(ids), "%" PRId64 ":%" PRId64, (int64_t)archive_entry_uid(e),
                     (int64_t)archive_entry_gid(e));
        if (n < 0 || (size_t)n >= sizeof(ids))
                return -EINVAL;
        n = loop_write(u->owners_fd, ids, (size_t)n + 1);
        if (n >= 0)
                n = loop_write(u->owners_fd, rel, strlen(rel) + 1);
        return n;
}

/* The owner (as root) and mtime of @name in @pfd (not a directory). */
static int entry_meta_at(Unpack *u, struct archive_entry *e, int pfd, const char *name,
                         const char *rel) {
        struct timespec times[2] = {
                {.tv_nsec = UTIME_OMIT},
                {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)}};

        if (u->owners == IMAGE_LAYER_OWNERS_KEEP &&
            fchownat(pfd, name, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
                     AT_SYMLINK_NOFOLLOW) < 0)
                return hutch_error_set(u->reterr, errno, "failed to chown '%.200s': %m", rel);
        if (times[1].tv_nsec < 0 || times[1].tv_nsec >= 1000000000L)
                times[1].tv_nsec = 0;
        (void)utimensat(pfd, name, times, AT_SYMLINK_NOFOLLOW);
        return owners_record(u, e, rel);
}

static int defer_dir(Unpack *u, const char *rel, struct archive_entry *e) {
        char *copy;

        if (u->n_dirs == u->n_dirs_alloc) {
                size_t alloc = u->n_dirs_alloc ? u->n_dirs_alloc * 2 : 64;
                DirMeta *dirs = reallocarray(u->dirs, alloc, sizeof(DirMeta));

                if (!dirs)
                        return -ENOMEM;
                u->dirs = dirs;
                u->n_dirs_alloc = alloc;
        }
        copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        u->dirs[u->n_dirs++] = (DirMeta){
                .rel = copy,
                .mode = archive_entry_perm(e) & 07777,
                .mtime = {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)},
        };
        return 0;
}

static int write_data(Unpack *u, int fd, const char *rel, la_int64_t want) {
        uint64_t got = 0;

        for (;;) {
                la_ssize_t n = archive_read_data(u->inner, u->buf, BUF_SIZE);
                int r;

                if (n < 0)
                        return archive_fail(u, u->inner);
                if (n == 0)
                        break;
                got += (uint64_t)n;
                if (u->res.size + got > IMAGE_SIZE_MAX)
                        return hutch_error_set(u->reterr, E2BIG,
                                               "the layer holds more than %" PRIu64 " bytes",
                                               IMAGE_SIZE_MAX);
                r = loop_write(fd, u->buf, (size_t)n);
                if (r < 0)
                        return hutch_error_set(u->reterr, -r, "failed to write '%.200s': %s", rel,
                                               strerror(-r));
        }
        if (want >= 0 && got != (uint64_t)want)
                return hutch_error_set(u->reterr, EBADMSG, "layer entry '%.200s' is truncated",
                                       rel);
        u->res.size += got;
        return 0;
}

static int make_whiteout(Unpack *u, int pfd, const char *name, const char *rel) {
        int r = replace_prepare(pfd, name, false);

        if (r < 0)
                return hutch_error_set(u->reterr, -r, "failed to replace '%.200s': %s", rel,
                                       strerror(-r));
        if (mknodat(pfd, name, S_IFCHR | 0600, makedev(0, 0)) < 0)
                return hutch_error_set(u->reterr, errno, "failed to create whiteout '%.200s': %m",
                                       rel);
        return 0;
}

static int make_opaque(Unpack *u, const char *dir_rel) {
        _cleanup_close_ int pfd = -EBADF, fd = -EBADF;

        pfd = dir_open(u, dir_rel, true);
        if (pfd >= 0)
                fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fsetxattr(fd, LAYER_XATTR_OPAQUE, "y", 1, 0) < 0)
                return hutch_error_set(u->reterr, pfd < 0 ? -pfd : errno,
                                       "failed to make '%.200s' opaque: %s", dir_rel,
                                       strerror(pfd < 0 ? -pfd : errno));
        return 0;
}

static int make_hardlink(Unpack *u, struct archive_entry *e, int pfd, const char *name,
                         const char *rel) {
        _cleanup_free_ char *target = NULL;
        _cleanup_close_ int tfd = -EBADF;
        const char *tname;
        char *slash;
        struct stat st;
        int r;

        r = entry_path(u, archive_entry_hardlink(e), "hard link target", &target);
        if (r < 0)
                return r;
        if (!target[0])
                return hutch_error_set(u->reterr, EPERM,
                                       "layer entry '%.200s' is a hard link to "
                                       "the layer's root",
                                       rel);
        slash = strrchr(target, '/');
        if (slash) {
                *slash = '\0';
                tfd = openat_beneath(u->root_fd, target, O_PATH | O_DIRECTORY, 0);
                *slash = '/';
                tname = slash + 1;
        } else {
                tfd = openat_beneath(u->root_fd, ".", O_PATH | O_DIRECTORY, 0);
                tname = target;
        }
        /* SECURITY: the target is an entry this layer made, reached
         * without following a symlink: never a file outside the layer. */
        if (tfd < 0 || fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
                return hutch_error_set(u->reterr, EPERM,
                                       "layer entry '%.200s' is a hard link to '%.200s', which "
                                       "is not a file of this layer",
                                       rel, target);
        if (strcmp(target, rel) == 0)
                return 0;
        r = replace_prepare(pfd, name, false);
        if (r < 0)
                return hutch_error_set(u->reterr, -r, "failed to replace '%.200s': %s", rel,
                                       strerror(-r));
        if (linkat(tfd, tname, pfd, name, 0) < 0)
                return hutch_error_set(u->reterr, errno, "failed to link '%.200s': %m", rel);
        return 0;
}

#define XATTRS_PER_ENTRY_MAX 64
#define XATTR_CAPS_V2_SIZE 20 /* struct vfs_cap_data */
#define XATTR_CAPS_V3_SIZE 24 /* struct vfs_ns_cap_data: and a rootid */

/* A file capability as the store keeps it: revision 2 (no root id), which
 * an idmapped sandbox reads as its own root's (the kernel maps the
 * missing root id through the mount's id map). A revision 3 one counts
 * only with root id 0, the image's root; anything else is not kept. */
static bool caps_to_v2(const void *value, size_t size, uint8_t out[XATTR_CAPS_V2_SIZE]) {
        uint32_t magic, rootid;

        if (size != XATTR_CAPS_V2_SIZE && size != XATTR_CAPS_V3_SIZE)
                return false;
        memcpy(&magic, value, 4);
        magic = le32toh(magic);
        if ((magic & 0xff000000u) == 0x02000000u && size == XATTR_CAPS_V2_SIZE) {
                memcpy(out, value, XATTR_CAPS_V2_SIZE);
                return true;
        }
        if ((magic & 0xff000000u) != 0x03000000u || size != XATTR_CAPS_V3_SIZE)
                return false;
        memcpy(&rootid, (const uint8_t *)value + XATTR_CAPS_V2_SIZE, 4);
        if (le32toh(rootid) != 0)
                return false;
        magic = htole32(0x02000000u | (magic & 0x00ffffffu));
        memcpy(out, &magic, 4);
        memcpy(out + 4, (const uint8_t *)value + 4, XATTR_CAPS_V2_SIZE - 4);
        return true;
}

/* The entry's xattrs onto @fd (a regular file or a directory): user.*
 * (not user.overlay.*, which would be overlayfs's own metadata: SECURITY,
 * a layer must not forge whiteouts, opaque dirs or redirects), and, in a
 * root's import (owners kept), security.capability (caps_to_v2()). The
 * rest (trusted.*, other security.*, system.* ACLs) is not kept, nor is
 * anything a filesystem without xattrs refuses (docs/images.md). */
static int apply_xattrs(Unpack *u, struct archive_entry *e, int fd, const char *rel) {
        const char *name;
        const void *value;
        size_t size;
        int n = archive_entry_xattr_reset(e);

        if (n > XATTRS_PER_ENTRY_MAX)
                return hutch_error_set(u->reterr, E2BIG, "'%.200s' has %d xattrs (at most %d)", rel,
                                       n, XATTRS_PER_ENTRY_MAX);
        while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
                uint8_t caps[XATTR_CAPS_V2_SIZE];

                if (!name)
                        continue;
                if (strncmp(name, "user.", 5) == 0 && strncmp(name, "user.overlay.", 13) != 0) {
                        if (fsetxattr(fd, name, value, size, 0) < 0 && errno != ENOTSUP &&
                            errno != EOPNOTSUPP)
                                return hutch_error_set(u->reterr, errno,
                                                       "failed to set %.100s on '%.200s': %m", name,
                                                       rel);
                } else if (strcmp(name, "security.capability") == 0 &&
                           u->owners == IMAGE_LAYER_OWNERS_KEEP && caps_to_v2(value, size, caps)) {
                        if (fsetxattr(fd, name, caps, sizeof(caps), 0) < 0 && errno != ENOTSUP &&
                            errno != EOPNOTSUPP)
                                return hutch_error_set(u->reterr, errno,
                                                       "failed to set the file capability of "
                                                       "'%.200s': %m",
                                                       rel);
                }
        }
        return 0;
}

static int make_file(Unpack *u, struct archive_entry *e, int pfd, const char *name,
                     const char *rel) {
        struct timespec times[2] = {
                {.tv_nsec = UTIME_OMIT},
                {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)}};
        _cleanup_close_ int fd = -EBADF;
        mode_t mode = archive_entry_perm(e) & 07777;
        int r;

        r = replace_prepare(pfd, name, false);
        if (r < 0)
                return hutch_error_set(u->reterr, -r, "failed to replace '%.200s': %s", rel,
                                       strerror(-r));
        fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return hutch_error_set(u->reterr, errno, "failed to create '%.200s': %m", rel);
        r = write_data(u, fd, rel, archive_entry_size_is_set(e) ? archive_entry_size(e) : -1);
        if (r < 0)
                return r;
        if (u->owners == IMAGE_LAYER_OWNERS_KEEP &&
            fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0)
                return hutch_error_set(u->reterr, errno, "failed to chown '%.200s': %m", rel);
        /* After the chown, which clears setuid/setgid. SECURITY: they are
         * kept (an image's su, passwd) in a store no other host user can
         * enter (0700), and a sandbox mounts its root nosuid for host ids. */
        if (fchmod(fd, mode) < 0)
                return hutch_error_set(u->reterr, errno, "failed to chmod '%.200s': %m", rel);
        /* After the chown, which clears a file capability. */
        r = apply_xattrs(u, e, fd, rel);
        if (r < 0)
                return r;
        if (times[1].tv_nsec < 0 || times[1].tv_nsec >= 1000000000L)
                times[1].tv_nsec = 0;
        (void)futimens(fd, times);
        return owners_record(u, e, rel);
}

static int make_dir(Unpack *u, struct archive_entry *e, int pfd, const char *name,
                    const char *rel) {
        int r = replace_prepare(pfd, name, true);

        if (r < 0)
                return hutch_error_set(u->reterr, -r, "failed to replace '%.200s': %s", rel,
                                       strerror(-r));
        if (r == 0 && mkdirat(pfd, name, 0700) < 0)
                return hutch_error_set(u->reterr, errno, "failed to create '%.200s': %m", rel);
        if (u->owners == IMAGE_LAYER_OWNERS_KEEP &&
            fchownat(pfd, name, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
                     AT_SYMLINK_NOFOLLOW) < 0)
                return hutch_error_set(u->reterr, errno, "failed to chown '%.200s': %m", rel);
        if (archive_entry_xattr_count(e) > 0) {
                _cleanup_close_ int fd =
                        openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (fd < 0)
                        return hutch_error_set(u->reterr, errno, "failed to open '%.200s': %m",
                                               rel);
                r = apply_xattrs(u, e, fd, rel);
                if (r < 0)
                        return r;
        }
        r = owners_record(u, e, rel);
        if (r < 0)
                return r;
        return defer_dir(u, rel, e);
}

static int unpack_entry(Unpack *u, struct archive_entry *e) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int pfd = -EBADF;
        const char *name, *parent;
        mode_t type = archive_entry_filetype(e);
        la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
        char *slash;
        int r;

        r = entry_path(u, archive_entry_pathname(e), "entry", &rel);
        if (r < 0)
                return r;
        if (++u->res.entries > IMAGE_ENTRIES_MAX)
                return hutch_error_set(u->reterr, E2BIG, "the layer has more than %u entries",
                                       IMAGE_ENTRIES_MAX);
        if (uid < 0 || uid >= UINT32_MAX || gid < 0 || gid >= UINT32_MAX)
                return hutch_error_set(u->reterr, EINVAL, "layer entry '%.200s' has a bad owner",
                                       rel);
        if (!rel[0]) {
                /* The layer's root: only its mode and mtime matter. */
                if (type != AE_IFDIR || archive_entry_hardlink(e))
                        return hutch_error_set(u->reterr, EINVAL,
                                               "the layer's root entry is not a directory");
                return defer_dir(u, "", e);
        }
        slash = strrchr(rel, '/');
        if (slash) {
                *slash = '\0';
                parent = rel;
                name = slash + 1;
        } else {
                parent = "";
                name = rel;
        }
        if (strcmp(name, OPAQUE_NAME) == 0) {
                r = make_opaque(u, parent);
                if (slash)
                        *slash = '/';
                return r;
        }
        pfd = dir_open(u, parent, true);
        if (slash)
                *slash = '/';
        if (pfd < 0)
                return hutch_error_set(u->reterr, pfd == -ELOOP || pfd == -EXDEV ? EPERM : -pfd,
                                       "the parent of layer entry '%.200s' is not a directory of "
                                       "the layer: %s",
                                       rel, strerror(-pfd));
        if (strncmp(name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0) {
                const char *victim = name + strlen(WHITEOUT_PREFIX);

                if (!victim[0] || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0)
                        return hutch_error_set(u->reterr, EINVAL,
                                               "layer entry '%.200s' is a whiteout of nothing",
                                               rel);
                return make_whiteout(u, pfd, victim, rel);
        }
        if (archive_entry_hardlink(e))
                return make_hardlink(u, e, pfd, name, rel);
        switch (type) {
        case AE_IFREG:
                return make_file(u, e, pfd, name, rel);
        case AE_IFDIR:
                return make_dir(u, e, pfd, name, rel);
        case AE_IFLNK: {
                const char *target = archive_entry_symlink(e);

                if (!target || !target[0] || strlen(target) >= PATH_MAX)
                        return hutch_error_set(u->reterr, EINVAL,
                                               "layer entry '%.200s' is a symlink without a "
                                               "target",
                                               rel);
                r = replace_prepare(pfd, name, false);
                if (r < 0)
                        return hutch_error_set(u->reterr, -r, "failed to replace '%.200s': %s", rel,
                                               strerror(-r));
                if (symlinkat(target, pfd, name) < 0)
                        return hutch_error_set(u->reterr, errno, "failed to create '%.200s': %m",
                                               rel);
                return entry_meta_at(u, e, pfd, name, rel);
        }
        case AE_IFIFO:
                r = replace_prepare(pfd, name, false);
                if (r < 0)
                        return hutch_error_set(u->reterr, -r, "failed to replace '%.200s': %s", rel,
                                               strerror(-r));
                if (mknodat(pfd, name, S_IFIFO | (archive_entry_perm(e) & 0777), 0) < 0)
                        return hutch_error_set(u->reterr, errno, "failed to create '%.200s': %m",
                                               rel);
                return entry_meta_at(u, e, pfd, name, rel);
        case AE_IFCHR:
                if (archive_entry_rdevmajor(e) == 0 && archive_entry_rdevminor(e) == 0)
                        return make_whiteout(u, pfd, name, rel);
                u->res.skipped_devices++;
                return 0;
        case AE_IFBLK:
        case AE_IFSOCK:
                /* SECURITY: never a device node from an image (image-layer.h). */
                u->res.skipped_devices++;
                return 0;
        default:
                return hutch_error_set(u->reterr, EINVAL,
                                       "layer entry '%.200s' has an unknown "
                                       "type",
                                       rel);
        }
}

/* Applies the directories' modes and mtimes, deepest (latest) first. */
static int apply_dirs(Unpack *u) {
        for (size_t i = u->n_dirs; i-- > 0;) {
                const DirMeta *d = &u->dirs[i];
                struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, d->mtime};
                _cleanup_close_ int fd = -EBADF;
                mode_t mode = d->mode;

                fd = openat_beneath(u->root_fd, d->rel[0] ? d->rel : ".", O_RDONLY | O_DIRECTORY,
                                    0);
                if (fd < 0)
                        continue; /* replaced by a later entry */
                /* A user's import: the user must be able to remove it. */
                if (u->owners == IMAGE_LAYER_OWNERS_CALLER)
                        mode |= 0700;
                if (times[1].tv_nsec < 0 || times[1].tv_nsec >= 1000000000L)
                        times[1].tv_nsec = 0;
                if (fchmod(fd, mode) < 0)
                        return hutch_error_set(u->reterr, errno, "failed to chmod '%.200s': %m",
                                               d->rel);
                (void)futimens(fd, times);
        }
        return 0;
}

int image_layer_unpack(int blob_fd, int dest_dirfd, ImageLayerOwners owners, int owners_fd,
                       ImageLayerResult *ret, HutchError *reterr) {
        _cleanup_(unpack_done) Unpack u = {
                .blob_fd = blob_fd,
                .root_fd = dest_dirfd,
                .owners = owners,
                .owners_fd = owners_fd,
                .reterr = reterr,
        };
        struct archive_entry *e;
        int r;

        if (blob_fd < 0 || dest_dirfd < 0)
                return hutch_error_set(reterr, EINVAL, "bad arguments to the layer reader");
        u.in_buf = malloc(BUF_SIZE);
        u.mid_buf = malloc(BUF_SIZE);
        u.buf = malloc(BUF_SIZE);
        u.blob_md = EVP_MD_CTX_new();
        u.tar_md = EVP_MD_CTX_new();
        if (!u.in_buf || !u.mid_buf || !u.buf || !u.blob_md || !u.tar_md)
                return -ENOMEM;
        if (EVP_DigestInit_ex(u.blob_md, EVP_sha256(), NULL) != 1 ||
            EVP_DigestInit_ex(u.tar_md, EVP_sha256(), NULL) != 1)
                return -EIO;
        if (fchmod(dest_dirfd, 0755) < 0)
                return hutch_error_set(reterr, errno, "failed to chmod the layer's root: %m");

        u.outer = archive_read_new();
        if (!u.outer)
                return -ENOMEM;
        if (archive_read_support_filter_gzip(u.outer) != ARCHIVE_OK ||
            archive_read_support_filter_zstd(u.outer) != ARCHIVE_OK ||
            archive_read_support_format_raw(u.outer) != ARCHIVE_OK ||
            archive_read_open(u.outer, &u, NULL, outer_read_cb, NULL) != ARCHIVE_OK)
                return archive_fail(&u, u.outer);
        r = archive_read_next_header(u.outer, &e);
        if (r == ARCHIVE_EOF)
                return hutch_error_set(reterr, EBADMSG, "the layer is empty");
        if (r != ARCHIVE_OK)
                return archive_fail(&u, u.outer);
        switch (archive_filter_code(u.outer, 0)) {
        case ARCHIVE_FILTER_GZIP:
                u.res.compression = OCI_COMPRESSION_GZIP;
                break;
        case ARCHIVE_FILTER_ZSTD:
                u.res.compression = OCI_COMPRESSION_ZSTD;
                break;
        case ARCHIVE_FILTER_NONE:
                u.res.compression = OCI_COMPRESSION_NONE;
                break;
        default:
                return hutch_error_set(reterr, EPROTONOSUPPORT,
                                       "the layer is compressed with %s, not gzip or zstd",
                                       archive_filter_name(u.outer, 0) ?: "something else");
        }

        u.inner = archive_read_new();
        if (!u.inner)
                return -ENOMEM;
        if (archive_read_support_format_tar(u.inner) != ARCHIVE_OK ||
            archive_read_open(u.inner, &u, NULL, inner_read_cb, NULL) != ARCHIVE_OK)
                return archive_fail(&u, u.inner);
        for (;;) {
                r = archive_read_next_header(u.inner, &e);
                if (r == ARCHIVE_EOF)
                        break;
                if (r != ARCHIVE_OK) /* ARCHIVE_WARN too */
                        return archive_fail(&u, u.inner);
                r = unpack_entry(&u, e);
                if (r < 0)
                        return r;
        }
        /* The diff id covers the whole uncompressed stream, padding after
         * the end-of-archive blocks included; the blob digest every byte. */
        for (;;) {
                la_ssize_t n = archive_read_data(u.outer, u.mid_buf, BUF_SIZE);

                if (n < 0)
                        return archive_fail(&u, u.outer);
                if (n == 0)
                        break;
                if (EVP_DigestUpdate(u.tar_md, u.mid_buf, (size_t)n) != 1)
                        return -EIO;
                u.res.tar_size += (uint64_t)n;
        }
        for (;;) {
                const void *p;
                la_ssize_t n = outer_read_cb(u.outer, &u, &p);

                if (n < 0)
                        return archive_fail(&u, u.outer);
                if (n == 0)
                        break;
        }
        if (digest_final(u.blob_md, u.res.blob_digest) < 0 ||
            digest_final(u.tar_md, u.res.diff_id) < 0)
                return hutch_error_set(reterr, EIO, "SHA-256 failed");
        r = apply_dirs(&u);
        if (r < 0)
                return r;
        *ret = u.res;
        return 0;
}
