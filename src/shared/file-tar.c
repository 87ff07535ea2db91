/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "file-op.h"
#include "file-tar.h"
#include "macro.h"
#include "strv.h"

#define BLOCK 512U
#define CHUNK (64U << 10)

/* A POSIX ustar header (pax, "ustar Interchange Format"). */
typedef struct TarHeader {
        char name[100], mode[8], uid[8], gid[8], size[12], mtime[12], chksum[8];
        char typeflag, linkname[100], magic[6], version[2], uname[32], gname[32];
        char devmajor[8], devminor[8], prefix[155], pad[12];
} TarHeader;

_Static_assert(sizeof(TarHeader) == BLOCK, "a tar header is one block");

static size_t pad_of(uint64_t n) {
        return (size_t)((BLOCK - n % BLOCK) % BLOCK);
}

/* Opens directory @name of @dirfd without following a symlink (-ELOOP
 * for one), with @flags. */
static int dir_open(int dirfd, const char *name, int flags) {
        struct stat st;
        int fd;

        fd = openat(dirfd, name, flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                return fd;
        if (errno == ENOTDIR && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
                return -ELOOP;
        return negative_errno();
}

/* ---- pack ---- */

typedef struct Pack {
        int out_fd;
        uint64_t max, written;
        size_t n;
} Pack;

static int pack_write(Pack *p, const void *buf, size_t n) {
        if (n > p->max - p->written)
                return -EFBIG;
        p->written += n;
        return loop_write(p->out_fd, buf, n);
}

static int pack_zeros(Pack *p, size_t n) {
        static const char zero[BLOCK];

        assert(n <= BLOCK);
        return n > 0 ? pack_write(p, zero, n) : 0;
}

/* A number in octal, or base-256 (GNU, star) when it does not fit. */
static void put_num(char *field, size_t len, uint64_t v) {
        if (len > 1 && v < (UINT64_C(1) << (3 * (len - 1)))) {
                char tmp[24];

                (void)snprintf(tmp, sizeof(tmp), "%0*llo", (int)(len - 1), (unsigned long long)v);
                memcpy(field, tmp, len);
                return;
        }
        memset(field, 0, len);
        field[0] = (char)0x80;
        for (size_t i = len - 1; i > 0 && v > 0; i--, v >>= 8)
                field[i] = (char)(v & 0xff);
}

static void put_checksum(TarHeader *h) {
        const unsigned char *b = (const unsigned char *)h;
        unsigned sum = 0;
        char tmp[8];

        memset(h->chksum, ' ', sizeof(h->chksum));
        for (size_t i = 0; i < BLOCK; i++)
                sum += b[i];
        (void)snprintf(tmp, sizeof(tmp), "%06o", sum & 0777777);
        memcpy(h->chksum, tmp, 7);
}

/* Appends the pax record "LEN KEY=VALUE\n" to @buf (@len so far). */
static int pax_record(char **buf, size_t *len, const char *key, const char *value) {
        size_t body = 1 + strlen(key) + 1 + strlen(value) + 1, n = body + 1;
        char *b;

        /* The length counts its own digits. */
        while (n != body + (size_t)snprintf(NULL, 0, "%zu", n))
                n = body + (size_t)snprintf(NULL, 0, "%zu", n);
        b = realloc(*buf, *len + n + 1);
        if (!b)
                return -ENOMEM;
        (void)snprintf(b + *len, n + 1, "%zu %s=%s\n", n, key, value);
        *buf = b;
        *len += n;
        return 0;
}

static void header_init(TarHeader *h, const char *path, char type, mode_t mode, uint64_t size,
                        int64_t mtime, const char *link) {
        *h = (TarHeader){.typeflag = type};
        memcpy(h->name, path, MIN(strlen(path), sizeof(h->name)));
        put_num(h->mode, sizeof(h->mode), mode & 07777);
        put_num(h->uid, sizeof(h->uid), 0);
        put_num(h->gid, sizeof(h->gid), 0);
        put_num(h->size, sizeof(h->size), size);
        put_num(h->mtime, sizeof(h->mtime), mtime > 0 ? (uint64_t)mtime : 0);
        if (link)
                memcpy(h->linkname, link, MIN(strlen(link), sizeof(h->linkname)));
        memcpy(h->magic, "ustar", 6);
        memcpy(h->version, "00", 2);
        put_checksum(h);
}

/* One entry's header(s): a pax 'x' header first when the path or the link
 * target does not fit its ustar field. */
static int pack_header(Pack *p, const char *path, char type, mode_t mode, uint64_t size,
                       int64_t mtime, const char *link) {
        TarHeader h;
        int r;

        if (strlen(path) > sizeof(h.name) || (link && strlen(link) > sizeof(h.linkname))) {
                _cleanup_free_ char *pax = NULL;
                size_t len = 0;

                r = pax_record(&pax, &len, "path", path);
                if (r >= 0 && link)
                        r = pax_record(&pax, &len, "linkpath", link);
                if (r < 0)
                        return r;
                header_init(&h, "././@PaxHeader", 'x', 0644, len, mtime, NULL);
                r = pack_write(p, &h, sizeof(h));
                if (r >= 0)
                        r = pack_write(p, pax, len);
                if (r >= 0)
                        r = pack_zeros(p, pad_of(len));
                if (r < 0)
                        return r;
        }
        header_init(&h, path, type, mode, size, mtime, link);
        return pack_write(p, &h, sizeof(h));
}

/* Exactly @size bytes of the regular file @fd (zeros when it shrank
 * meanwhile, the first @size bytes when it grew), padded. */
static int pack_data(Pack *p, int fd, uint64_t size) {
        _cleanup_free_ char *buf = malloc(CHUNK);
        uint64_t left = size;
        bool eof = false;
        int r;

        if (!buf)
                return -ENOMEM;
        while (left > 0) {
                size_t want = (size_t)MIN(left, (uint64_t)CHUNK);
                ssize_t n = eof ? 0 : loop_read(fd, buf, want);

                if (n < 0)
                        return (int)n;
                if ((size_t)n < want) {
                        memset(buf + n, 0, want - (size_t)n);
                        eof = true;
                }
                r = pack_write(p, buf, want);
                if (r < 0)
                        return r;
                left -= want;
        }
        return pack_zeros(p, pad_of(size));
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int pack_dir(Pack *p, int fd, const char *prefix, unsigned depth);

static int pack_entry(Pack *p, int fd, const char *name, const char *rel, unsigned depth) {
        struct stat st;
        int64_t mtime;
        int r;

        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        mtime = (int64_t)st.st_mtim.tv_sec;
        if (S_ISDIR(st.st_mode)) {
                _cleanup_free_ char *dir = NULL;
                _cleanup_close_ int sub = -EBADF;

                if (depth == 0)
                        return -ELOOP;
                if (asprintf(&dir, "%s/", rel) < 0)
                        return -ENOMEM;
                sub = dir_open(fd, name, O_RDONLY);
                /* Replaced since the stat: left out, never followed. */
                if (sub == -ELOOP || sub == -ENOENT || sub == -ENOTDIR)
                        return 0;
                if (sub < 0)
                        return sub;
                r = pack_header(p, dir, '5', st.st_mode, 0, mtime, NULL);
                return r < 0 ? r : pack_dir(p, sub, dir, depth - 1);
        }
        if (S_ISREG(st.st_mode)) {
                _cleanup_close_ int f =
                        openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

                if (f < 0)
                        return errno == ENOENT || errno == ELOOP ? 0 : negative_errno();
                if (fstat(f, &st) < 0)
                        return negative_errno();
                if (!S_ISREG(st.st_mode))
                        return 0;
                r = pack_header(p, rel, '0', st.st_mode, (uint64_t)st.st_size,
                                (int64_t)st.st_mtim.tv_sec, NULL);
                return r < 0 ? r : pack_data(p, f, (uint64_t)st.st_size);
        }
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(fd, name, target, sizeof(target) - 1);

                if (n < 0)
                        return errno == ENOENT || errno == EINVAL ? 0 : negative_errno();
                target[n] = '\0';
                return pack_header(p, rel, '2', 0777, 0, mtime, target);
        }
        /* fifos, sockets, devices: not part of a tree's content. */
        return 0;
}

static int pack_dir(Pack *p, int fd, const char *prefix, unsigned depth) {
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        size_t n = 0;
        int r;

        r = opendir_fd(fd, &d);
        if (r < 0)
                return r;
        errno = 0;
        while ((de = readdir_no_dot(d))) {
                if (++p->n > FILE_TAR_ENTRIES_MAX)
                        return -E2BIG;
                r = strv_extend(&names, de->d_name);
                if (r < 0)
                        return r;
                n++;
                errno = 0;
        }
        if (errno != 0)
                return negative_errno();
        if (n > 0)
                qsort(names, n, sizeof(char *), cmp_names);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *rel = NULL;

                if (asprintf(&rel, "%s%s", prefix, names[i]) < 0)
                        return -ENOMEM;
                if (strlen(rel) >= PATH_MAX)
                        return -ENAMETOOLONG;
                r = pack_entry(p, fd, names[i], rel, depth);
                if (r < 0)
                        return r;
        }
        return 0;
}

int file_tar_pack(int dirfd, const char *name, uint64_t max, int out_fd) {
        _cleanup_close_ int fd = -EBADF;
        Pack p = {.out_fd = out_fd, .max = max};
        int r;

        if (max == 0)
                return -EINVAL;
        fd = name ? dir_open(dirfd, name, O_RDONLY)
                  : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return name ? fd : negative_errno();
        r = pack_dir(&p, fd, "", FILE_OP_WALK_DEPTH_MAX);
        if (r < 0)
                return r;
        /* The end: two zero blocks. */
        r = pack_zeros(&p, BLOCK);
        return r < 0 ? r : pack_zeros(&p, BLOCK);
}

/* ---- unpack ---- */

typedef struct DirFix {
        char *rel;
        mode_t mode;
        int64_t mtime;
} DirFix;

typedef struct Unpack {
        int root, in_fd;
        uint64_t max, data;
        size_t n;
        DirFix *dirs;
        size_t n_dirs;
        char *msg;
        const char *entry;
        /* From pax and GNU headers, for the next entry. */
        char *next_path, *next_link;
        bool has_size, has_mtime;
        uint64_t next_size;
        int64_t next_mtime;
} Unpack;

static void unpack_done(Unpack *u) {
        for (size_t i = 0; i < u->n_dirs; i++)
                free(u->dirs[i].rel);
        free(u->dirs);
        free(u->next_path);
        free(u->next_link);
}

_printf_(3, 4) static int fail(Unpack *u, int r, const char *fmt, ...) {
        char what[FILE_TAR_MSG_MAX - 96];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        if (u->entry)
                (void)snprintf(u->msg, FILE_TAR_MSG_MAX, "entry '%.80s': %s", u->entry, what);
        else
                (void)snprintf(u->msg, FILE_TAR_MSG_MAX, "%s", what);
        return r;
}

static int read_exact(Unpack *u, void *buf, size_t n) {
        ssize_t k = loop_read(u->in_fd, buf, n);

        if (k < 0)
                return fail(u, (int)k, "cannot read the archive: %s", strerror((int)-k));
        if ((size_t)k != n)
                return fail(u, -EBADMSG, "the archive is truncated");
        return 0;
}

/* Reads and drops @n bytes of data and their padding. */
static int skip_data(Unpack *u, uint64_t n) {
        _cleanup_free_ char *buf = malloc(CHUNK);
        int r;

        if (!buf)
                return -ENOMEM;
        for (n += pad_of(n); n > 0;) {
                size_t k = (size_t)MIN(n, (uint64_t)CHUNK);

                r = read_exact(u, buf, k);
                if (r < 0)
                        return r;
                n -= k;
        }
        return 0;
}

/* A numeric field: octal (leading spaces, ending at a NUL or space) or
 * base-256 (positive only). -EBADMSG otherwise. */
static int get_num(const char *field, size_t len, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;

        if ((unsigned char)field[0] == 0x80) {
                for (i = 1; i < len; i++) {
                        if (v >> 56)
                                return -EBADMSG;
                        v = (v << 8) | (unsigned char)field[i];
                }
                *ret = v;
                return 0;
        }
        while (i < len && field[i] == ' ')
                i++;
        for (; i < len && field[i] != '\0' && field[i] != ' '; i++) {
                if (field[i] < '0' || field[i] > '7' || (v >> 60))
                        return -EBADMSG;
                v = v * 8 + (uint64_t)(field[i] - '0');
        }
        *ret = v;
        return 0;
}

static bool checksum_ok(const TarHeader *h) {
        const unsigned char *b = (const unsigned char *)h;
        uint64_t want;
        unsigned sum = 0;
        int ssum = 0;

        if (get_num(h->chksum, sizeof(h->chksum), &want) < 0)
                return false;
        for (size_t i = 0; i < BLOCK; i++) {
                bool in_field = i >= offsetof(TarHeader, chksum) &&
                                i < offsetof(TarHeader, chksum) + sizeof(h->chksum);

                sum += in_field ? ' ' : b[i];
                ssum += in_field ? ' ' : (signed char)b[i];
        }
        return want == sum || (ssum >= 0 && want == (uint64_t)ssum);
}

/* The data of a pax 'x' header: path, linkpath, size and mtime for the
 * next entry; other keys are ignored. */
static int parse_pax(Unpack *u, char *data, size_t len) {
        size_t pos = 0;

        while (pos < len) {
                char *rec = data + pos, *sp, *eq, *val;
                uint64_t n = 0;

                sp = memchr(rec, ' ', len - pos);
                if (!sp)
                        return fail(u, -EBADMSG, "a malformed pax header");
                for (char *c = rec; c < sp; c++) {
                        if (*c < '0' || *c > '9' || n > len)
                                return fail(u, -EBADMSG, "a malformed pax header");
                        n = n * 10 + (uint64_t)(*c - '0');
                }
                if (n <= (uint64_t)(sp - rec) + 1 || n > len - pos || rec[n - 1] != '\n')
                        return fail(u, -EBADMSG, "a malformed pax header");
                rec[n - 1] = '\0';
                eq = strchr(sp + 1, '=');
                if (!eq)
                        return fail(u, -EBADMSG, "a malformed pax header");
                *eq = '\0';
                val = eq + 1;
                if (strcmp(sp + 1, "path") == 0 || strcmp(sp + 1, "linkpath") == 0) {
                        char **dst = sp[1] == 'p' ? &u->next_path : &u->next_link;

                        if (strlen(val) != (size_t)(rec + n - 1 - val))
                                return fail(u, -EBADMSG, "a NUL byte in a pax path");
                        free(*dst);
                        *dst = strdup(val);
                        if (!*dst)
                                return -ENOMEM;
                } else if (strcmp(sp + 1, "size") == 0 || strcmp(sp + 1, "mtime") == 0) {
                        uint64_t v = 0;
                        bool digits = false;

                        /* mtime may have a fraction: the seconds are kept. */
                        for (const char *c = val; *c && *c != '.'; c++) {
                                if (*c < '0' || *c > '9' || v > UINT64_MAX / 10 - 9)
                                        return fail(u, -EBADMSG, "a bad number in a pax header");
                                v = v * 10 + (uint64_t)(*c - '0');
                                digits = true;
                        }
                        if (!digits)
                                return fail(u, -EBADMSG, "a bad number in a pax header");
                        if (sp[1] == 's') {
                                u->has_size = true;
                                u->next_size = v;
                        } else {
                                u->has_mtime = true;
                                u->next_mtime = v > INT64_MAX ? INT64_MAX : (int64_t)v;
                        }
                }
                pos += n;
        }
        return 0;
}

/* Checks the archive path @path and writes its components, joined by '/'
 * without "." or empty ones, to @ret ("" for the directory itself). */
static int norm_path(Unpack *u, const char *path, const char *what, char **ret) {
        _cleanup_free_ char *copy = strdup(path), *out = NULL;
        char *save = NULL;
        size_t len = 0;

        if (!copy)
                return -ENOMEM;
        if (path[0] == '/')
                return fail(u, -EPERM, "%san absolute path", what);
        if (strlen(path) >= PATH_MAX)
                return fail(u, -ENAMETOOLONG, "%sa path too long", what);
        out = calloc(1, strlen(path) + 1);
        if (!out)
                return -ENOMEM;
        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (strcmp(c, ".") == 0)
                        continue;
                if (strcmp(c, "..") == 0)
                        return fail(u, -EPERM, "%sa '..' component", what);
                if (strlen(c) > NAME_MAX)
                        return fail(u, -ENAMETOOLONG, "%sa name too long", what);
                if (len > 0)
                        out[len++] = '/';
                memcpy(out + len, c, strlen(c));
                len += strlen(c);
        }
        *ret = TAKE_PTR(out);
        return 0;
}

/* Opens the directory that holds @rel (changed: its last '/' cut), each
 * component without following a symlink, making missing ones (0755) when
 * @create; @ret_name points to @rel's last component. */
static int open_parent_of(Unpack *u, char *rel, bool create, int *ret_dirfd,
                          const char **ret_name) {
        _cleanup_close_ int fd = openat(u->root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        char *slash = strrchr(rel, '/'), *save = NULL;

        if (fd < 0)
                return negative_errno();
        if (slash) {
                *slash = '\0';
                for (char *c = strtok_r(rel, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                        int next = dir_open(fd, c, O_PATH);

                        if (next == -ENOENT && create) {
                                if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST)
                                        return fail(u, negative_errno(), "cannot make '%s': %m", c);
                                /* SECURITY: opened again without following. */
                                next = dir_open(fd, c, O_PATH);
                        }
                        if (next == -ELOOP)
                                return fail(u, next, "a symlink on the way ('%s')", c);
                        if (next < 0)
                                return fail(u, next, "cannot open '%s': %s", c, strerror(-next));
                        (void)close(fd);
                        fd = next;
                }
        }
        *ret_name = slash ? slash + 1 : rel;
        *ret_dirfd = TAKE_FD(fd);
        return 0;
}

/* A name for a temporary entry in the directory being extracted into. */
static int tmp_name(char buf[static 32]) {
        uint64_t rnd = 0;

        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        (void)snprintf(buf, 32, ".hutch-tar-%016llx", (unsigned long long)rnd);
        return 0;
}

static int refuse_dir(Unpack *u, int dirfd, const char *name) {
        struct stat st;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                return fail(u, -EISDIR, "a directory is in the way");
        return 0;
}

static int copy_in(Unpack *u, int fd, uint64_t size) {
        _cleanup_free_ char *buf = malloc(CHUNK);
        int r;

        if (!buf)
                return -ENOMEM;
        for (uint64_t left = size; left > 0;) {
                size_t k = (size_t)MIN(left, (uint64_t)CHUNK);

                r = read_exact(u, buf, k);
                if (r < 0)
                        return r;
                r = loop_write(fd, buf, k);
                if (r < 0)
                        return fail(u, r, "cannot write: %s", strerror(-r));
                left -= k;
        }
        return read_exact(u, buf, pad_of(size));
}

static int unpack_file(Unpack *u, char *rel, mode_t mode, uint64_t size, int64_t mtime) {
        const struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = mtime}};
        _cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
        const char *name;
        char tmp[32];
        int r;

        if (size > u->max - u->data)
                return fail(u, -EFBIG,
                            "%llu bytes, more than the archive holds or the limit allows (%llu "
                            "bytes)",
                            (unsigned long long)size, (unsigned long long)u->max);
        u->data += size;
        r = open_parent_of(u, rel, true, &dirfd, &name);
        if (r >= 0)
                r = refuse_dir(u, dirfd, name);
        if (r >= 0)
                r = tmp_name(tmp);
        if (r < 0)
                return r;
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return fail(u, negative_errno(), "cannot create it: %m");
        r = copy_in(u, fd, size);
        /* SECURITY: never set-user-id or set-group-id. */
        if (r >= 0 && fchmod(fd, mode & 01777) < 0)
                r = fail(u, negative_errno(), "cannot set its mode: %m");
        if (r >= 0 && futimens(fd, ts) < 0)
                r = fail(u, negative_errno(), "cannot set its mtime: %m");
        /* rename(): an existing symlink there is replaced, never written
         * through. */
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = fail(u, negative_errno(), "cannot rename it into place: %m");
        if (r < 0)
                (void)unlinkat(dirfd, tmp, 0);
        return r;
}

/* An existing directory made writable until the end (its mode from the
 * archive is set then). */
static int unpack_dir_writable(Unpack *u, int dirfd, const char *name, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;

        if ((mode & 0700) == 0700)
                return 0;
        fd = dir_open(dirfd, name, O_RDONLY);
        if (fd < 0)
                return fail(u, fd, "cannot open it: %s", strerror(-fd));
        if (fchmod(fd, (mode & 07777) | 0700) < 0)
                return fail(u, negative_errno(), "cannot make it writable: %m");
        return 0;
}

static int unpack_dir(Unpack *u, char *rel, mode_t mode, int64_t mtime) {
        _cleanup_free_ char *keep = strdup(rel);
        _cleanup_close_ int dirfd = -EBADF;
        const char *name;
        struct stat st;
        DirFix *d;
        int r;

        if (!keep)
                return -ENOMEM;
        if (rel[0]) {
                r = open_parent_of(u, rel, true, &dirfd, &name);
                if (r < 0)
                        return r;
                /* Writable until the end, when its own mode is set. */
                if (mkdirat(dirfd, name, 0700) < 0) {
                        if (errno != EEXIST)
                                return fail(u, negative_errno(), "cannot make it: %m");
                        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                return fail(u, negative_errno(), "cannot stat it: %m");
                        if (!S_ISDIR(st.st_mode))
                                return fail(u, -EEXIST, "it exists and is not a directory");
                        r = unpack_dir_writable(u, dirfd, name, st.st_mode);
                        if (r < 0)
                                return r;
                }
        }
        d = reallocarray(u->dirs, u->n_dirs + 1, sizeof(DirFix));
        if (!d)
                return -ENOMEM;
        u->dirs = d;
        u->dirs[u->n_dirs++] =
                (DirFix){.rel = TAKE_PTR(keep), .mode = mode & 01777, .mtime = mtime};
        return 0;
}

/* Whether the symlink at @rel pointing to @target stays inside, lexically
 * (the rule of the snapshot archive, store/archive-internal.h): a relative
 * @target never climbs above the directory extracted into (counted from
 * the link's own directory); an absolute one names the sandbox's own
 * paths and never climbs above its "/" ("/../x"). */
static bool link_contained(const char *rel, const char *target) {
        long depth = 0;
        const char *c = target;

        if (!target[0] || strlen(target) >= PATH_MAX)
                return false;
        if (target[0] != '/')
                for (const char *s = rel; *s; s++)
                        depth += *s == '/';
        while (*c) {
                size_t n = strcspn(c, "/");

                if (n == 2 && c[0] == '.' && c[1] == '.') {
                        if (--depth < 0)
                                return false;
                } else if (n > 0 && !(n == 1 && c[0] == '.'))
                        depth++;
                c += n;
                c += *c == '/';
        }
        return true;
}

static int unpack_symlink(Unpack *u, char *rel, const char *target, int64_t mtime) {
        const struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = mtime}};
        _cleanup_close_ int dirfd = -EBADF;
        const char *name;
        char tmp[32];
        int r;

        if (!link_contained(rel, target))
                return fail(u, -EPERM, "a symlink pointing outside the directory ('%.64s')",
                            target);
        r = open_parent_of(u, rel, true, &dirfd, &name);
        if (r >= 0)
                r = refuse_dir(u, dirfd, name);
        if (r >= 0)
                r = tmp_name(tmp);
        if (r < 0)
                return r;
        if (symlinkat(target, dirfd, tmp) < 0)
                return fail(u, negative_errno(), "cannot make the symlink: %m");
        (void)utimensat(dirfd, tmp, ts, AT_SYMLINK_NOFOLLOW);
        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                r = fail(u, negative_errno(), "cannot rename it into place: %m");
                (void)unlinkat(dirfd, tmp, 0);
        }
        return r;
}

static int unpack_hardlink(Unpack *u, char *rel, const char *target) {
        _cleanup_close_ int dirfd = -EBADF, tdirfd = -EBADF;
        _cleanup_free_ char *t = NULL;
        const char *name, *tname;
        struct stat st;
        int r;

        r = norm_path(u, target, "a hard link to ", &t);
        if (r < 0)
                return r;
        if (!t[0])
                return fail(u, -EPERM, "a hard link to the directory itself");
        r = open_parent_of(u, t, false, &tdirfd, &tname);
        if (r < 0)
                return r;
        if (fstatat(tdirfd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return fail(u, -EPERM, "a hard link to something other than a file extracted here");
        r = open_parent_of(u, rel, true, &dirfd, &name);
        if (r >= 0)
                r = refuse_dir(u, dirfd, name);
        if (r < 0)
                return r;
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                return fail(u, negative_errno(), "cannot replace it: %m");
        if (linkat(tdirfd, tname, dirfd, name, 0) < 0)
                return fail(u, negative_errno(), "cannot make the hard link: %m");
        return 0;
}

/* Directory modes and mtimes, deepest first. */
static int fix_dirs(Unpack *u) {
        for (size_t i = u->n_dirs; i > 0; i--) {
                const struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
                                               {.tv_sec = u->dirs[i - 1].mtime}};
                _cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
                char *rel = u->dirs[i - 1].rel;
                const char *name;
                int r;

                u->entry = rel;
                if (rel[0]) {
                        r = open_parent_of(u, rel, false, &dirfd, &name);
                        if (r < 0)
                                return r;
                        fd = dir_open(dirfd, name, O_RDONLY);
                } else
                        fd = openat(u->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return fail(u, fd, "cannot open it again: %s", strerror(-fd));
                if (fchmod(fd, u->dirs[i - 1].mode) < 0 || futimens(fd, ts) < 0)
                        return fail(u, negative_errno(), "cannot set its mode or mtime: %m");
        }
        return 0;
}

/* A 'x', 'g', 'L' or 'K' header's data, read whole into memory. */
static int read_meta(Unpack *u, uint64_t size, uint64_t cap, char **ret) {
        _cleanup_free_ char *buf = NULL;
        char pad[BLOCK];
        int r;

        if (size > cap)
                return fail(u, -EFBIG, "an extended header of %llu bytes",
                            (unsigned long long)size);
        buf = malloc((size_t)size + 1);
        if (!buf)
                return -ENOMEM;
        r = read_exact(u, buf, (size_t)size);
        if (r >= 0)
                r = read_exact(u, pad, pad_of(size));
        if (r < 0)
                return r;
        buf[size] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

/* The path of a ustar header: prefix "/" name. */
static int header_path(const TarHeader *h, char **ret) {
        size_t nl = strnlen(h->name, sizeof(h->name));
        size_t pl = memcmp(h->magic, "ustar", 6) == 0 ? strnlen(h->prefix, sizeof(h->prefix)) : 0;

        if (asprintf(ret, "%.*s%s%.*s", (int)pl, h->prefix, pl > 0 ? "/" : "", (int)nl, h->name) <
            0)
                return -ENOMEM;
        return 0;
}

static int unpack_entry(Unpack *u, const TarHeader *h) {
        _cleanup_free_ char *raw = NULL, *rel = NULL, *link = NULL;
        uint64_t size = 0, mode = 0, mtime = 0;
        char type = h->typeflag;
        int r;

        if (get_num(h->size, sizeof(h->size), &size) < 0 ||
            get_num(h->mode, sizeof(h->mode), &mode) < 0 ||
            get_num(h->mtime, sizeof(h->mtime), &mtime) < 0)
                return fail(u, -EBADMSG, "a bad number in a header");
        switch (type) {
        case 'x':
                r = read_meta(u, size, FILE_TAR_PAX_MAX, &raw);
                return r < 0 ? r : parse_pax(u, raw, (size_t)size);
        case 'g':
                return size > FILE_TAR_PAX_MAX ? fail(u, -EFBIG, "a pax header too large")
                                               : skip_data(u, size);
        case 'L':
        case 'K':
                r = read_meta(u, size, PATH_MAX - 1, &raw);
                if (r < 0)
                        return r;
                free(type == 'L' ? u->next_path : u->next_link);
                if (type == 'L')
                        u->next_path = TAKE_PTR(raw);
                else
                        u->next_link = TAKE_PTR(raw);
                return 0;
        default:
                break;
        }
        if (++u->n > FILE_TAR_ENTRIES_MAX)
                return fail(u, -E2BIG, "more than %u entries", FILE_TAR_ENTRIES_MAX);
        if (u->next_path)
                raw = TAKE_PTR(u->next_path);
        else if (header_path(h, &raw) < 0)
                return -ENOMEM;
        link = u->next_link ? TAKE_PTR(u->next_link) : strndup(h->linkname, sizeof(h->linkname));
        if (!link)
                return -ENOMEM;
        if (u->has_size)
                size = u->next_size;
        if (u->has_mtime)
                mtime = (uint64_t)u->next_mtime;
        u->has_size = u->has_mtime = false;
        if (mtime > INT64_MAX)
                mtime = INT64_MAX;
        u->entry = raw;
        r = norm_path(u, raw, "", &rel);
        if (r < 0)
                return r;
        switch (type) {
        case '0':
        case '\0':
        case '7':
                if (!rel[0])
                        return fail(u, -EISDIR, "a file as the directory itself");
                return unpack_file(u, rel, (mode_t)(mode & 07777), size, (int64_t)mtime);
        case '5':
                r = unpack_dir(u, rel, (mode_t)(mode & 07777), (int64_t)mtime);
                return r < 0 ? r : skip_data(u, size);
        case '2':
                if (!rel[0])
                        return fail(u, -EPERM, "a symlink as the directory itself");
                r = unpack_symlink(u, rel, link, (int64_t)mtime);
                return r < 0 ? r : skip_data(u, size);
        case '1':
                if (!rel[0])
                        return fail(u, -EPERM, "a hard link as the directory itself");
                r = unpack_hardlink(u, rel, link);
                return r < 0 ? r : skip_data(u, size);
        case '3':
        case '4':
        case '6':
                return fail(u, -EPERM, "a device node or fifo");
        default:
                return fail(u, -EINVAL, "an unsupported entry type ('%c')",
                            type >= 0x20 && type < 0x7f ? type : '?');
        }
}

static int unpack_run(Unpack *u) {
        TarHeader h;
        int r;

        for (;;) {
                static const char zero[BLOCK];
                ssize_t k = loop_read(u->in_fd, &h, sizeof(h));

                u->entry = NULL;
                if (k < 0)
                        return fail(u, (int)k, "cannot read the archive: %s", strerror((int)-k));
                /* The end: a zero block, or (as some writers do) none. */
                if (k == 0 && u->n > 0)
                        break;
                if ((size_t)k != sizeof(h))
                        return fail(u, -EBADMSG,
                                    k == 0 ? "the archive is empty" : "the archive is truncated");
                if (memcmp(&h, zero, sizeof(h)) == 0)
                        break;
                if (!checksum_ok(&h))
                        return fail(u, -EBADMSG, "a header with a bad checksum (not a tar?)");
                r = unpack_entry(u, &h);
                if (r < 0)
                        return r;
        }
        return fix_dirs(u);
}

int file_tar_unpack(int dirfd, const char *name, bool create, uint64_t max, int in_fd, int out_fd) {
        char msg[FILE_TAR_MSG_MAX] = "";
        _cleanup_close_ int fd = -EBADF;
        Unpack u = {.in_fd = in_fd, .max = max, .msg = msg};
        int r;

        if (max == 0)
                return -EINVAL;
        if (!name)
                fd = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        else {
                fd = dir_open(dirfd, name, O_PATH);
                if (fd == -ENOENT && create) {
                        if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
                                return negative_errno();
                        fd = dir_open(dirfd, name, O_PATH);
                }
        }
        if (fd < 0)
                return name ? fd : negative_errno();
        u.root = fd;
        r = unpack_run(&u);
        unpack_done(&u);
        if (r < 0 && msg[0]) {
                char buf[4096];

                /* The rest of the archive first: the message follows it. */
                while (loop_read(in_fd, buf, sizeof(buf)) > 0)
                        ;
                (void)loop_write(out_fd, msg, strlen(msg));
        }
        return r;
}
