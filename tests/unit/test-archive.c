/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "fd-util.h"
#include "store/archive-internal.h"
#include "store/archive.h"
#include "test.h"

#define BIG_SIZE (5u << 20)
/* The ids a sandbox's files carry on the host (a mapped range). */
#define MAPPED_ID 100000
#define NOBODY 65534
#define TEST_MANIFEST "{\"name\": \"snap-1\", \"created\": \"2024-05-01T12:00:00Z\"}"

#define ASSERT_MSG(err, sub)                                                                       \
        do {                                                                                       \
                if (!strstr((err).msg, (sub)))                                                     \
                        fail_msg("%s:%d: message \"%s\" lacks \"%s\"", __FILE__, __LINE__,         \
                                 (err).msg, (sub));                                                \
        } while (0)

static char *tmpdir_new(void) {
        char *p = strdup("/var/tmp/test-archive-XXXXXX");

        ASSERT_NOT_NULL(p);
        ASSERT_NOT_NULL(mkdtemp(p));
        return p;
}

static int dir_open(int dirfd, const char *path) {
        int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        ASSERT_OK(fd);
        return fd;
}

static void tree_remove(char *path) {
        int fd = dir_open(AT_FDCWD, path);

        ASSERT_OK(snapshot_archive_clear(fd));
        (void)close(fd);
        ASSERT_OK(rmdir(path));
        free(path);
}

static void file_write(int dirfd, const char *name, const void *data, size_t n, mode_t mode) {
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        ASSERT_OK(fd);
        ASSERT_OK(loop_write(fd, data, n));
        ASSERT_OK(fchmod(fd, mode));
        (void)close(fd);
}

static void mkdir_mode(int dirfd, const char *name, mode_t mode) {
        ASSERT_OK(mkdirat(dirfd, name, 0700));
        ASSERT_OK(fchmodat(dirfd, name, mode, 0));
}

static void own(int dirfd, const char *name) {
        if (geteuid() == 0)
                ASSERT_OK(fchownat(dirfd, name, MAPPED_ID, MAPPED_ID + 1, AT_SYMLINK_NOFOLLOW));
}

static void xattr_set(int dirfd, const char *name, const char *key, const void *v, size_t n) {
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

        ASSERT_OK(fd);
        ASSERT_OK(fsetxattr(fd, key, v, n, 0));
        (void)close(fd);
}

static char *big_data(void) {
        char *p = malloc(BIG_SIZE);
        uint64_t s = 0x9e3779b97f4a7c15ULL;

        ASSERT_NOT_NULL(p);
        /* xorshift: incompressible, so it fills the middle of the archive. */
        for (size_t i = 0; i < BIG_SIZE; i++) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                p[i] = (char)s;
        }
        return p;
}

/* Layer 1 (the lower one): ordinary content. */
static void layer1_fill(int l) {
        _cleanup_free_ char *big = big_data();
        int etc, d;

        mkdir_mode(l, "etc", 0755);
        etc = dir_open(l, "etc");
        file_write(etc, "conf", "a=1\n", 4, 0644);
        ASSERT_OK(linkat(etc, "conf", etc, "conf-hardlink", 0));
        ASSERT_OK(symlinkat("../etc/conf", etc, "self"));
        own(etc, "conf");
        (void)close(etc);
        file_write(l, "big", big, BIG_SIZE, 0644);
        ASSERT_OK(mkdirat(l, "a", 0755));
        ASSERT_OK(mkdirat(l, "a/b", 0755));
        ASSERT_OK(mkdirat(l, "a/b/c", 0750));
        ASSERT_OK(mkdirat(l, "a/b/c/d", 0700));
        d = dir_open(l, "a/b/c/d");
        file_write(d, "deep", "deep\n", 5, 0600);
        (void)close(d);
        ASSERT_OK(symlinkat("b/c", l, "a/link"));
        own(l, "a/link");
        /* The sandbox's own path (a venv's python3): stored as it is. */
        ASSERT_OK(symlinkat("/usr/bin/python3", l, "a/python3"));
        own(l, "a/b");
}

/* Layer 0 (the top): whiteouts, an opaque directory, odd names, modes. */
static void layer0_fill(int l) {
        static const char *const weird[] = {
                "sp ace",
                "new\nline",
                "tab\there",
                "quo\"te'\\",
                "\303\274n\303\257 c\303\266d\303\251 \342\234\223", /* "ünï cödé ✓" */
                "-dash",
                "...",
                ".hidden",
                "#%*?[]{}$",
        };
        static const char binary[] = {0, 1, 2, (char)0xff};
        struct timespec old[2] = {{12345, 678}, {12345, 678}};
        char longname[NAME_MAX + 1];
        int d;

        mkdir_mode(l, "etc", 0755);
        ASSERT_OK(mknodat(l, "etc/conf", S_IFCHR | 0000, makedev(0, 0)));
        own(l, "etc/conf");
        mkdir_mode(l, "a", 0755);
        xattr_set(l, "a", "user.overlay.opaque", "y", 1);
        file_write(l, "a/new", "new\n", 4, 0644);
        for (size_t i = 0; i < ELEMENTSOF(weird); i++)
                file_write(l, weird[i], weird[i], strlen(weird[i]), 0644);
        memset(longname, 'x', NAME_MAX);
        longname[NAME_MAX] = '\0';
        file_write(l, longname, "long\n", 5, 0640);
        file_write(l, "suid", "#!/bin/sh\n", 10, 04755);
        own(l, "suid");
        mkdir_mode(l, "sgid", 02775);
        file_write(l, "ro", "read-only\n", 10, 0444);
        file_write(l, "empty", "", 0, 0644);
        file_write(l, "xattrs", "x", 1, 0644);
        xattr_set(l, "xattrs", "user.custom", binary, sizeof(binary));
        xattr_set(l, "xattrs", "user.empty", "", 0);
        ASSERT_OK(utimensat(l, "xattrs", old, 0));
        ASSERT_OK(symlinkat("nowhere/at/all", l, "dangling"));
        ASSERT_OK(mkdirat(l, "rodir", 0700));
        d = dir_open(l, "rodir");
        file_write(d, "inside", "inside\n", 7, 0644);
        (void)close(d);
        ASSERT_OK(fchmodat(l, "rodir", 0555, 0));
        own(l, "rodir");
        ASSERT_OK(mkdirat(l, "sticky", 0700));
        ASSERT_OK(fchmodat(l, "sticky", 01777, 0));
}

typedef struct Layers {
        char *root;
        int fds[2];
} Layers;

static void layers_make(Layers *ls) {
        int root;

        ls->root = tmpdir_new();
        root = dir_open(AT_FDCWD, ls->root);
        for (int i = 0; i < 2; i++) {
                char name[2] = {(char)('0' + i), 0};

                ASSERT_OK(mkdirat(root, name, 0755));
                ls->fds[i] = dir_open(root, name);
        }
        (void)close(root);
        layer0_fill(ls->fds[0]);
        layer1_fill(ls->fds[1]);
}

static void layers_done(Layers *ls) {
        for (int i = 0; i < 2; i++)
                (void)close(ls->fds[i]);
        tree_remove(ls->root);
}

static int memfd_new(void) {
        int fd = memfd_create("archive", MFD_CLOEXEC);

        ASSERT_OK(fd);
        return fd;
}

static int export_layers(const Layers *ls, HutchError *err) {
        int fd = memfd_new();

        ASSERT_OK(snapshot_archive_export(TEST_MANIFEST, ls->fds, 2, fd, err));
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        return fd;
}

static void xattrs_compare(int a, int b, const char *name) {
        char la[4096], lb[4096], va[4096], vb[4096];
        ssize_t na = flistxattr(a, la, sizeof(la)), nb = flistxattr(b, lb, sizeof(lb));
        size_t count = 0;

        ASSERT_OK(na);
        ASSERT_OK(nb);
        for (const char *k = la; k < la + na; k += strlen(k) + 1) {
                ssize_t sa, sb;

                if (strncmp(k, "user.", 5) != 0)
                        continue;
                count++;
                sa = fgetxattr(a, k, va, sizeof(va));
                sb = fgetxattr(b, k, vb, sizeof(vb));
                if (sb < 0)
                        fail_msg("'%s': xattr '%s' was not restored", name, k);
                ASSERT_EQ(sa, sb);
                ASSERT_EQ(memcmp(va, vb, (size_t)sa), 0);
        }
        for (const char *k = lb; k < lb + nb; k += strlen(k) + 1)
                if (strncmp(k, "user.", 5) == 0)
                        count--;
        ASSERT_EQ(count, 0);
}

static void content_compare(int a, int b) {
        static char ba[65536], bb[65536];

        for (;;) {
                ssize_t na = loop_read(a, ba, sizeof(ba)), nb = loop_read(b, bb, sizeof(bb));

                ASSERT_OK(na);
                ASSERT_EQ(na, nb);
                if (na == 0)
                        return;
                ASSERT_EQ(memcmp(ba, bb, (size_t)na), 0);
        }
}

/* What import should make of @src's metadata: ids kept as root, else the
 * caller's (@uid/@gid); setuid/setgid dropped. */
typedef struct Expect {
        bool keep_ids;
        uid_t uid;
        gid_t gid;
} Expect;

static void stat_compare(const struct stat *s, const struct stat *d, const Expect *x,
                         const char *name) {
        if ((s->st_mode & S_IFMT) != (d->st_mode & S_IFMT))
                fail_msg("'%s': type %o became %o", name, s->st_mode & S_IFMT, d->st_mode & S_IFMT);
        if (!S_ISLNK(s->st_mode) && (s->st_mode & 01777) != (d->st_mode & 07777))
                fail_msg("'%s': mode %o became %o", name, s->st_mode & 07777, d->st_mode & 07777);
        ASSERT_EQ(d->st_uid, x->keep_ids ? s->st_uid : x->uid);
        ASSERT_EQ(d->st_gid, x->keep_ids ? s->st_gid : x->gid);
        if (s->st_mtim.tv_sec != d->st_mtim.tv_sec || s->st_mtim.tv_nsec != d->st_mtim.tv_nsec)
                fail_msg("'%s': mtime %lld.%09ld became %lld.%09ld", name,
                         (long long)s->st_mtim.tv_sec, s->st_mtim.tv_nsec,
                         (long long)d->st_mtim.tv_sec, d->st_mtim.tv_nsec);
        if (S_ISREG(s->st_mode))
                ASSERT_EQ(s->st_size, d->st_size);
        if (S_ISCHR(s->st_mode))
                ASSERT_EQ(d->st_rdev, makedev(0, 0));
}

static int no_dots(const struct dirent *de) {
        return strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
}

/* Compares the trees below @a (the source layer) and @b (imported). */
static void trees_compare(int a, int b, const Expect *x, unsigned *count) {
        struct dirent **la = NULL, **lb = NULL;
        int na = scandirat(a, ".", &la, no_dots, alphasort);
        int nb = scandirat(b, ".", &lb, no_dots, alphasort);

        ASSERT_OK(na);
        ASSERT_EQ(na, nb);
        for (int i = 0; i < na; i++) {
                const char *name = la[i]->d_name;
                struct stat sa, sb;

                ASSERT_STREQ(name, lb[i]->d_name);
                ASSERT_OK(fstatat(a, name, &sa, AT_SYMLINK_NOFOLLOW));
                ASSERT_OK(fstatat(b, name, &sb, AT_SYMLINK_NOFOLLOW));
                stat_compare(&sa, &sb, x, name);
                (*count)++;
                if (S_ISLNK(sa.st_mode)) {
                        char ta[PATH_MAX], tb[PATH_MAX];
                        ssize_t n = readlinkat(a, name, ta, sizeof(ta));

                        ASSERT_OK(n);
                        ASSERT_EQ(readlinkat(b, name, tb, sizeof(tb)), n);
                        ASSERT_EQ(memcmp(ta, tb, (size_t)n), 0);
                } else if (S_ISREG(sa.st_mode) || S_ISDIR(sa.st_mode)) {
                        int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
                        int fa = openat(a, name, flags), fb = openat(b, name, flags);

                        ASSERT_OK(fa);
                        ASSERT_OK(fb);
                        xattrs_compare(fa, fb, name);
                        if (S_ISREG(sa.st_mode))
                                content_compare(fa, fb);
                        else
                                trees_compare(fa, fb, x, count);
                        (void)close(fa);
                        (void)close(fb);
                }
        }
        for (int i = 0; i < na; i++) {
                free(la[i]);
                free(lb[i]);
        }
        free(la);
        free(lb);
}

/* Compares layer @i of @ls with layers/<i> below @dest, roots included. */
static unsigned layer_compare(const Layers *ls, int i, int dest, const Expect *x) {
        char path[32];
        struct stat sa, sb;
        unsigned count = 1;
        int b;

        (void)snprintf(path, sizeof(path), "layers/%d", i);
        b = dir_open(dest, path);
        ASSERT_OK(fstat(ls->fds[i], &sa));
        ASSERT_OK(fstat(b, &sb));
        stat_compare(&sa, &sb, x, path);
        xattrs_compare(ls->fds[i], b, path);
        trees_compare(ls->fds[i], b, x, &count);
        (void)close(b);
        return count;
}

static void sha256_hex(const void *p, size_t n, char hex[65]) {
        unsigned char d[32];
        unsigned len = 0;

        ASSERT_EQ(EVP_Digest(p, n, d, &len, EVP_sha256(), NULL), 1);
        for (unsigned i = 0; i < 32; i++)
                (void)snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static void manifest_assert(const char *text, const unsigned entries[2]) {
        _cleanup_free_ char *big = big_data();
        json_t *root = json_loads(text, 0, NULL), *layers, *files;
        char hex[65];

        ASSERT_NOT_NULL(root);
        ASSERT_STREQ(json_string_value(json_object_get(root, "format")), "hutch-snapshot");
        ASSERT_EQ(json_integer_value(json_object_get(root, "format_version")), 1);
        ASSERT_STREQ(json_string_value(json_object_get(root, "name")), "snap-1");
        ASSERT_STREQ(json_string_value(json_object_get(root, "created")), "2024-05-01T12:00:00Z");
        layers = json_object_get(root, "layers");
        ASSERT_EQ(json_array_size(layers), 2);
        for (size_t i = 0; i < 2; i++) {
                json_t *l = json_array_get(layers, i);
                char dir[16];

                (void)snprintf(dir, sizeof(dir), "layers/%zu", i);
                ASSERT_STREQ(json_string_value(json_object_get(l, "dir")), dir);
                ASSERT_EQ(json_integer_value(json_object_get(l, "entries")), entries[i]);
        }
        files = json_object_get(json_array_get(layers, 1), "files");
        /* big, etc/conf, etc/conf-hardlink, a/b/c/d/deep */
        ASSERT_EQ(json_object_size(files), 4);
        sha256_hex(big, BIG_SIZE, hex);
        ASSERT_STREQ(json_string_value(json_object_get(files, "big")), hex);
        sha256_hex("a=1\n", 4, hex);
        ASSERT_STREQ(json_string_value(json_object_get(files, "etc/conf-hardlink")), hex);
        files = json_object_get(json_array_get(layers, 0), "files");
        ASSERT_NOT_NULL(json_object_get(files, "new\nline"));
        ASSERT_NOT_NULL(json_object_get(files, "rodir/inside"));
        ASSERT_NULL(json_object_get(files, "etc/conf")); /* a whiteout */
        json_decref(root);
}

TEST(roundtrip) {
        Expect x = {.keep_ids = geteuid() == 0, .uid = geteuid(), .gid = getegid()};
        _cleanup_free_ char *manifest = NULL;
        HutchError err = {};
        unsigned entries[2];
        char *dest = tmpdir_new();
        Layers ls;
        int fd, d;

        layers_make(&ls);
        fd = export_layers(&ls, &err);
        d = dir_open(AT_FDCWD, dest);
        ASSERT_OK(snapshot_archive_import(fd, d, &manifest, &err));
        for (int i = 0; i < 2; i++)
                entries[i] = layer_compare(&ls, i, d, &x);
        /* The trees hold what they should (nothing skipped on both sides). */
        ASSERT_EQ(entries[0], 24);
        ASSERT_EQ(entries[1], 13);
        manifest_assert(manifest, entries);

        (void)close(d);
        (void)close(fd);
        tree_remove(dest);
        layers_done(&ls);
}

TEST(export_is_reproducible) {
        HutchError err = {};
        struct stat a, b;
        Layers ls;
        int fa, fb;
        char *pa, *pb;

        layers_make(&ls);
        fa = export_layers(&ls, &err);
        fb = export_layers(&ls, &err);
        ASSERT_OK(fstat(fa, &a));
        ASSERT_OK(fstat(fb, &b));
        ASSERT_EQ(a.st_size, b.st_size);
        pa = mmap(NULL, (size_t)a.st_size, PROT_READ, MAP_PRIVATE, fa, 0);
        pb = mmap(NULL, (size_t)b.st_size, PROT_READ, MAP_PRIVATE, fb, 0);
        ASSERT_TRUE(pa != MAP_FAILED && pb != MAP_FAILED);
        ASSERT_EQ(memcmp(pa, pb, (size_t)a.st_size), 0);
        (void)munmap(pa, (size_t)a.st_size);
        (void)munmap(pb, (size_t)b.st_size);
        (void)close(fa);
        (void)close(fb);
        layers_done(&ls);
}

/* The manifest of an imported snapshot can be exported again: the reserved
 * keys are replaced, the caller's are kept. */
TEST(export_replaces_reserved_keys) {
        _cleanup_free_ char *manifest = NULL;
        HutchError err = {};
        char *src = tmpdir_new(), *dest = tmpdir_new();
        int s = dir_open(AT_FDCWD, src), d = dir_open(AT_FDCWD, dest), fd = memfd_new();
        json_t *root;

        file_write(s, "f", "f", 1, 0644);
        ASSERT_OK(snapshot_archive_export("{\"format\": \"x\", \"format_version\": 9, \"layers\": "
                                          "[], \"keep\": true}",
                                          &s, 1, fd, &err));
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        ASSERT_OK(snapshot_archive_import(fd, d, &manifest, &err));
        root = json_loads(manifest, 0, NULL);
        ASSERT_NOT_NULL(root);
        ASSERT_STREQ(json_string_value(json_object_get(root, "format")), "hutch-snapshot");
        ASSERT_EQ(json_integer_value(json_object_get(root, "format_version")), 1);
        ASSERT_EQ(json_array_size(json_object_get(root, "layers")), 1);
        ASSERT_TRUE(json_is_true(json_object_get(root, "keep")));
        json_decref(root);
        (void)close(fd);
        (void)close(s);
        (void)close(d);
        tree_remove(src);
        tree_remove(dest);
}

/* Export refuses what a snapshot cannot hold, naming it. */
TEST(export_refuses) {
        static const struct {
                const char *what;
                int err;
                const char *msg;
        } cases[] = {
                {"fifo", EPERM, "cannot export 'bad' in layer 0: a fifo"},
                {"device", EPERM, "character device other than a whiteout"},
                {"abs-symlink", EPERM, "symlink target '/../etc/passwd'"},
                {"escaping-symlink", EPERM, "symlink target '../../etc'"},
                {"latin1-name", EILSEQ, "must be UTF-8"},
                {"xattr-equals", EINVAL, "holds '='"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError err = {};
                char *src;
                int s, fd, r;

                /* Only root can make a device node for export to refuse. */
                if (strcmp(cases[i].what, "device") == 0 && geteuid() != 0)
                        continue;
                src = tmpdir_new();
                s = dir_open(AT_FDCWD, src);
                fd = memfd_new();
                file_write(s, "fine", "fine", 4, 0644);
                if (strcmp(cases[i].what, "fifo") == 0)
                        ASSERT_OK(mkfifoat(s, "bad", 0644));
                else if (strcmp(cases[i].what, "device") == 0)
                        ASSERT_OK(mknodat(s, "bad", S_IFCHR | 0644, makedev(1, 3)));
                else if (strcmp(cases[i].what, "abs-symlink") == 0)
                        ASSERT_OK(symlinkat("/../etc/passwd", s, "bad"));
                else if (strcmp(cases[i].what, "escaping-symlink") == 0) {
                        ASSERT_OK(mkdirat(s, "d", 0755));
                        ASSERT_OK(symlinkat("../../etc", s, "d/bad"));
                } else if (strcmp(cases[i].what, "latin1-name") == 0)
                        file_write(s, "caf\xe9", "x", 1, 0644);
                else
                        xattr_set(s, "fine", "user.a=b", "1", 1);
                r = snapshot_archive_export(TEST_MANIFEST, &s, 1, fd, &err);
                if (r != -cases[i].err)
                        fail_msg("%s: export returned %d (%s), expected -%d", cases[i].what, r,
                                 err.msg, cases[i].err);
                ASSERT_EQ(err.errnum, cases[i].err);
                ASSERT_MSG(err, cases[i].msg);
                (void)close(fd);
                (void)close(s);
                tree_remove(src);
        }
}

TEST(export_bad_arguments) {
        HutchError err = {};
        char *src = tmpdir_new();
        int s = dir_open(AT_FDCWD, src), fd = memfd_new();

        ASSERT_ERROR(snapshot_archive_export(TEST_MANIFEST, &s, 0, fd, &err), EINVAL);
        ASSERT_ERROR(snapshot_archive_export(TEST_MANIFEST, &s, SNAPSHOT_ARCHIVE_LAYERS_MAX + 1, fd,
                                             &err),
                     EINVAL);
        ASSERT_ERROR(snapshot_archive_export("[1]", &s, 1, fd, &err), EINVAL);
        ASSERT_MSG(err, "must be a JSON object");
        ASSERT_ERROR(snapshot_archive_export("{\"a\": ", &s, 1, fd, &err), EINVAL);
        ASSERT_MSG(err, "not JSON");
        ASSERT_ERROR(snapshot_archive_export(NULL, &s, 1, fd, &err), EINVAL);
        ASSERT_ERROR(snapshot_archive_export(TEST_MANIFEST, &s, 1, -EBADF, &err), EINVAL);
        (void)close(fd);
        (void)close(s);
        tree_remove(src);
}

/* Imports @fd (from its start) into a new directory and expects -@errnum
 * (any error when 0) with @msg (when not NULL); the destination then holds
 * no manifest and can be emptied. */
static void import_expect_fail(int fd, int errnum, const char *msg, const char *what) {
        char *manifest = NULL;
        HutchError err = {};
        char *dest = tmpdir_new();
        int d = dir_open(AT_FDCWD, dest), r;

        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        r = snapshot_archive_import(fd, d, &manifest, &err);
        if (errnum == 0 ? r >= 0 : r != -errnum)
                fail_msg("%s: import returned %d (%s), expected -%d (%s)", what, r, err.msg, errnum,
                         msg ? msg : "any message");
        ASSERT_EQ(err.errnum, -r);
        ASSERT_TRUE(err.msg[0] != '\0');
        if (msg)
                ASSERT_MSG(err, msg);
        ASSERT_NULL(manifest);
        ASSERT_EQ(faccessat(d, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        ASSERT_OK(snapshot_archive_clear(d));
        (void)close(d);
        ASSERT_OK(rmdir(dest)); /* empty now */
        free(dest);
}

/* A copy of the first @cut bytes of the archive @fd (@size bytes), with
 * the byte at @flip changed when it is not -1. */
static int archive_edited(int fd, size_t size, size_t cut, ssize_t flip) {
        char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        int out = memfd_new();

        ASSERT_TRUE(p != MAP_FAILED);
        ASSERT_OK(loop_write(out, p, cut));
        if (flip >= 0) {
                char c = (char)(p[flip] ^ 0x20);

                ASSERT_EQ(pwrite(out, &c, 1, flip), 1);
        }
        (void)munmap(p, size);
        ASSERT_OK(lseek(out, 0, SEEK_SET));
        return out;
}

TEST(import_corrupt) {
        HutchError err = {};
        struct stat st;
        size_t size;
        Layers ls;
        int fd, bad;

        layers_make(&ls);
        fd = export_layers(&ls, &err);
        ASSERT_OK(fstat(fd, &st));
        size = (size_t)st.st_size;

        /* The middle of the archive is the big file's data. */
        bad = archive_edited(fd, size, size, (ssize_t)size / 2);
        import_expect_fail(bad, EBADMSG, "checksum mismatch for 'layers/1/big'", "flip in big");
        (void)close(bad);
        /* Anywhere else: the zstd frame header, the compressed manifest
         * and headers, the end of the tar stream, the checksum frame. */
        for (size_t i = 0; i < 30; i++) {
                size_t at = i < 3 ? i * 4 : i < 12 ? i * 97 : size - 1 - (i - 12) * 37;
                char what[64];

                (void)snprintf(what, sizeof(what), "flip at %zu of %zu", at, size);
                bad = archive_edited(fd, size, size, (ssize_t)at);
                /* A flip in the manifest may make it invalid JSON, say
                 * (-EINVAL) rather than a checksum mismatch. */
                import_expect_fail(bad, 0, NULL, what);
                (void)close(bad);
        }

        /* Truncated anywhere, down to the last byte. */
        {
                const size_t cuts[] = {0,          1,        100,
                                       size / 4,   size / 2, size * 3 / 4,
                                       size - 100, size - 9, size - 1};

                for (size_t i = 0; i < ELEMENTSOF(cuts); i++) {
                        char what[64];

                        (void)snprintf(what, sizeof(what), "cut at %zu of %zu", cuts[i], size);
                        bad = archive_edited(fd, size, cuts[i], -1);
                        import_expect_fail(bad, EBADMSG, NULL, what);
                        (void)close(bad);
                }
        }
        (void)close(fd);
        layers_done(&ls);
}

/* ---- hand-made archives ---- */

#define HELLO_SHA "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define MANIFEST_V(version, entries, files)                                                        \
        "{\"name\": \"t\", \"format\": \"hutch-snapshot\", \"format_version\": " #version          \
        ", \"layers\": [{\"dir\": \"layers/0\", \"entries\": " #entries ", \"files\": {" files     \
        "}}]}"
#define MANIFEST(entries, files) MANIFEST_V(1, entries, files)
#define F_HELLO "\"f\": \"" HELLO_SHA "\""

typedef struct Spec {
        const char *path;
        mode_t type;      /* AE_IF* */
        const char *data; /* AE_IFREG */
        const char *link; /* AE_IFLNK target, or a hard link's */
        unsigned rdev_major, rdev_minor;
        const char *xattr; /* its name; the value is "y" */
} Spec;

#define ROOT                                                                                       \
        { "layers/0/", AE_IFDIR }
#define FILE_F                                                                                     \
        { "layers/0/f", AE_IFREG, "hello" }

/* Appends the checksum frame (archive.h) of the @size bytes in @fd. */
static void sum_frame_append(int fd, size_t size) {
        unsigned char frame[48] = {0x50, 0x2a, 0x4d, 0x18, 40,  0,   0,   0,
                                   'H',  'U',  'T',  'C',  'H', 'S', 'U', 'M'};
        char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        unsigned len = 0;

        ASSERT_TRUE(p != MAP_FAILED);
        ASSERT_EQ(EVP_Digest(p, size, frame + 16, &len, EVP_sha256(), NULL), 1);
        (void)munmap(p, size);
        ASSERT_OK(pwrite(fd, frame, sizeof(frame), (off_t)size));
}

typedef enum MakeFlags {
        MAKE_ZSTD = 1 << 0,
        MAKE_SUM = 1 << 1, /* end with a right checksum frame */
} MakeFlags;

/* Writes an archive as export would: @manifest (unless NULL) first, then
 * @specs (up to one whose path is NULL). */
static int archive_make(const char *manifest, const Spec *specs, unsigned flags) {
        struct archive *a = archive_write_new();
        int fd = memfd_new();
        struct stat st;

        ASSERT_NOT_NULL(a);
        if (flags & MAKE_ZSTD)
                ASSERT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        ASSERT_EQ(archive_write_set_format_pax(a), ARCHIVE_OK);
        ASSERT_EQ(archive_write_set_format_option(a, "pax", "xattrheader", "SCHILY"), ARCHIVE_OK);
        ASSERT_EQ(archive_write_set_bytes_in_last_block(a, 1), ARCHIVE_OK);
        ASSERT_EQ(archive_write_open_fd(a, fd), ARCHIVE_OK);
        for (int i = -1; i == -1 || specs[i].path; i++) {
                Spec s = i < 0 ? (Spec){"manifest.json", AE_IFREG, manifest} : specs[i];
                struct archive_entry *e;

                if (i < 0 && !manifest)
                        continue;
                e = archive_entry_new();
                archive_entry_set_pathname(e, s.path);
                archive_entry_set_filetype(e, s.type);
                archive_entry_set_perm(e, s.type == AE_IFDIR ? 0755 : 0644);
                archive_entry_set_mtime(e, 1700000000, 0);
                if (s.type == AE_IFREG && s.link)
                        archive_entry_set_hardlink(e, s.link);
                else if (s.type == AE_IFREG)
                        archive_entry_set_size(e, (la_int64_t)strlen(s.data));
                if (s.type == AE_IFLNK)
                        archive_entry_set_symlink(e, s.link);
                if (s.type == AE_IFCHR || s.type == AE_IFBLK)
                        archive_entry_set_rdev(e, makedev(s.rdev_major, s.rdev_minor));
                if (s.xattr)
                        archive_entry_xattr_add_entry(e, s.xattr, "y", 1);
                ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
                if (s.type == AE_IFREG && !s.link)
                        ASSERT_EQ(archive_write_data(a, s.data, strlen(s.data)),
                                  (la_ssize_t)strlen(s.data));
                archive_entry_free(e);
        }
        ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
        ASSERT_EQ(archive_write_free(a), ARCHIVE_OK);
        if (flags & MAKE_SUM) {
                ASSERT_OK(fstat(fd, &st));
                sum_frame_append(fd, (size_t)st.st_size);
        }
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        return fd;
}

typedef struct BadCase {
        const char *name;
        const char *manifest;
        Spec specs[5];
        int err;
        const char *msg;
} BadCase;

static const BadCase bad_cases[] = {
        {"version 2",
         MANIFEST_V(2, 2, F_HELLO),
         {ROOT, FILE_F},
         EPROTONOSUPPORT,
         "format_version 2 is not supported: this hutch reads format_version 1"},
        {"version 0", MANIFEST_V(0, 2, F_HELLO), {ROOT, FILE_F}, EINVAL, "format_version 0"},
        {"version string",
         MANIFEST_V("1", 2, F_HELLO),
         {ROOT, FILE_F},
         EINVAL,
         "must be an integer"},
        {"other format",
         "{\"format\": \"tar\", \"format_version\": 1, \"layers\": []}",
         {ROOT},
         EINVAL,
         "not a hutch snapshot"},
        {"manifest not JSON", "{\"format\": ", {ROOT}, EINVAL, "is not JSON"},
        {"manifest not first",
         NULL,
         {ROOT, {"manifest.json", AE_IFREG, MANIFEST(1, "")}},
         EINVAL,
         "first entry of a snapshot archive must be 'manifest.json', not 'layers/0/'"},
        {"manifest is a directory",
         NULL,
         {{"manifest.json", AE_IFDIR}},
         EINVAL,
         "must be 'manifest.json', not 'manifest.json/'"},
        {"no layers",
         "{\"format\": \"hutch-snapshot\", \"format_version\": 1, \"layers\": []}",
         {ROOT},
         EINVAL,
         "1 to 128 layers, not 0"},
        {"bad layer dir",
         "{\"format\": \"hutch-snapshot\", \"format_version\": 1, \"layers\": [{\"dir\": "
         "\"../x\", \"entries\": 1, \"files\": {}}]}",
         {ROOT},
         EINVAL,
         "/layers/0/dir"},
        {"unknown layer key",
         "{\"format\": \"hutch-snapshot\", \"format_version\": 1, \"layers\": [{\"dir\": "
         "\"layers/0\", \"entries\": 1, \"files\": {}, \"mode\": 1}]}",
         {ROOT},
         EINVAL,
         "/layers/0: unknown key 'mode'"},
        {"bad checksum string", MANIFEST(2, "\"f\": \"abc\""), {ROOT}, EINVAL, "64 lowercase hex"},
        {"manifest lists ../x",
         MANIFEST(2, "\"../x\": \"" HELLO_SHA "\""),
         {ROOT},
         EPERM,
         "/layers/0/files: a file has a '..' component: '../x'"},
        {"dot-dot first", MANIFEST(2, F_HELLO), {{"../x", AE_IFREG, "x"}}, EPERM, "'..' component"},
        {"dot-dot inside",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/../../x", AE_IFREG, "x"}},
         EPERM,
         "has a '..' component: 'layers/0/../../x'"},
        {"absolute", MANIFEST(2, F_HELLO), {ROOT, {"/abs", AE_IFREG, "x"}}, EPERM, "absolute"},
        {"empty component",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0//f", AE_IFREG, "hello"}},
         EINVAL,
         "an empty component"},
        {"dot component",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/./f", AE_IFREG, "hello"}},
         EINVAL,
         "a '.' component"},
        {"unlisted layer",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/1/", AE_IFDIR}},
         EINVAL,
         "not in a layer the manifest lists"},
        {"leading zero layer",
         MANIFEST(2, F_HELLO),
         {{"layers/00/", AE_IFDIR}},
         EINVAL,
         "not below 'layers/<index>/'"},
        {"outside layers",
         MANIFEST(2, F_HELLO),
         {ROOT, {"etc/passwd", AE_IFREG, "x"}},
         EINVAL,
         "not below 'layers/<index>/'"},
        {"hard link",
         MANIFEST(3, F_HELLO),
         {ROOT, FILE_F, {"layers/0/h", AE_IFREG, NULL, "layers/0/f"}},
         EPERM,
         "'layers/0/h' is a hard link"},
        {"block device",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/sda", AE_IFBLK, .rdev_major = 8}},
         EPERM,
         "is a block device"},
        {"char device",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/null", AE_IFCHR, .rdev_major = 1, .rdev_minor = 3}},
         EPERM,
         "character device other than a whiteout"},
        {"fifo", MANIFEST(2, F_HELLO), {ROOT, {"layers/0/p", AE_IFIFO}}, EPERM, "is a fifo"},
        {"symlink climbing out",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/l", AE_IFLNK, .link = "../../etc"}},
         EPERM,
         "symlink to '../../etc'"},
        {"symlink climbing out from below",
         MANIFEST(3, F_HELLO),
         {ROOT, {"layers/0/d/", AE_IFDIR}, {"layers/0/d/l", AE_IFLNK, .link = "a/../../../x"}},
         EPERM,
         "symlink to 'a/../../../x'"},
        {"absolute symlink climbing above the sandbox's root",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/l", AE_IFLNK, .link = "/usr/../../etc/shadow"}},
         EPERM,
         "symlink to '/usr/../../etc/shadow'"},
        {"write through an absolute symlink",
         MANIFEST(3, "\"a/evil\": \"" HELLO_SHA "\""),
         {ROOT,
          {"layers/0/a", AE_IFLNK, .link = "/tmp/hutch-test-archive-through"},
          {"layers/0/a/evil", AE_IFREG, "hello"}},
         EINVAL,
         "the parent of snapshot archive entry 'layers/0/a/evil' is not a directory"},
        {"write through a symlink",
         MANIFEST(4, F_HELLO),
         {ROOT,
          {"layers/0/d/", AE_IFDIR},
          {"layers/0/s", AE_IFLNK, .link = "d"},
          {"layers/0/s/f", AE_IFREG, "hello"}},
         EINVAL,
         "the parent of snapshot archive entry 'layers/0/s/f' is not a directory"},
        {"parent missing",
         MANIFEST(2, "\"d/f\": \"" HELLO_SHA "\""),
         {ROOT, {"layers/0/d/f", AE_IFREG, "hello"}},
         EINVAL,
         "the parent of snapshot archive entry 'layers/0/d/f'"},
        {"before the root",
         MANIFEST(2, F_HELLO),
         {FILE_F, ROOT},
         EINVAL,
         "before its layer's root"},
        {"root not a directory",
         MANIFEST(2, F_HELLO),
         {{"layers/0", AE_IFREG, "x"}},
         EINVAL,
         "(a layer's root) is not a directory"},
        {"unlisted file",
         MANIFEST(3, F_HELLO),
         {ROOT, FILE_F, {"layers/0/g", AE_IFREG, "hello"}},
         EINVAL,
         "'layers/0/g' is a file the manifest does not list"},
        {"checksum mismatch",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/f", AE_IFREG, "hellO"}},
         EBADMSG,
         "checksum mismatch for 'layers/0/f'"},
        {"missing file",
         MANIFEST(3, F_HELLO ", \"g\": \"" HELLO_SHA "\""),
         {ROOT, FILE_F},
         EINVAL,
         "file 'g' of layer 0, listed in the manifest, is missing"},
        {"duplicate", MANIFEST(3, F_HELLO), {ROOT, FILE_F, FILE_F}, EEXIST, "is there twice"},
        {"duplicate root", MANIFEST(3, F_HELLO), {ROOT, ROOT, FILE_F}, EEXIST, "is there twice"},
        {"too many entries",
         MANIFEST(2, F_HELLO),
         {ROOT, FILE_F, {"layers/0/d/", AE_IFDIR}},
         EINVAL,
         "more entries than the 2 its manifest lists"},
        {"too few entries",
         MANIFEST(3, F_HELLO),
         {ROOT, FILE_F},
         EINVAL,
         "layer 0 has 2 entries in the snapshot archive, its manifest lists 3"},
        {"trusted xattr",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/d/", AE_IFDIR, .xattr = "trusted.overlay.opaque"}},
         EPERM,
         "carries xattr 'trusted.overlay.opaque': only user.*"},
        {"security xattr",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/f", AE_IFREG, "hello", .xattr = "security.capability"}},
         EPERM,
         "carries xattr 'security.capability'"},
        {"overlay redirect xattr",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/d/", AE_IFDIR, .xattr = "user.overlay.redirect"}},
         EPERM,
         "carries xattr 'user.overlay.redirect': only user.* xattrs are allowed, and of "
         "user.overlay.* only opaque and whiteout"},
        {"overlay metacopy xattr",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/f", AE_IFREG, "hello", .xattr = "user.overlay.metacopy"}},
         EPERM,
         "carries xattr 'user.overlay.metacopy'"},
        {"xattr on a symlink",
         MANIFEST(2, F_HELLO),
         {ROOT, {"layers/0/l", AE_IFLNK, .link = "f", .xattr = "user.x"}},
         EINVAL,
         "only directories and regular files may"},
};

/* The archives archive_make() writes are right: the cases below fail for
 * their own reason. */
TEST(import_hand_made) {
        _cleanup_free_ char *manifest = NULL;
        Spec specs[] = {ROOT,
                        FILE_F,
                        {"layers/0/d/", AE_IFDIR},
                        {"layers/0/d/l", AE_IFLNK, .link = "../f"},
                        {"layers/0/wh", AE_IFCHR},
                        {NULL}};
        HutchError err = {};
        char *dest = tmpdir_new(), target[8] = {};
        int fd = archive_make(MANIFEST(5, F_HELLO), specs, MAKE_ZSTD | MAKE_SUM),
            d = dir_open(AT_FDCWD, dest);
        struct stat st;

        ASSERT_OK(snapshot_archive_import(fd, d, &manifest, &err));
        ASSERT_STREQ(manifest, MANIFEST(5, F_HELLO));
        ASSERT_OK(fstatat(d, "layers/0/f", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_size, 5);
        ASSERT_EQ(st.st_mtim.tv_sec, 1700000000);
        ASSERT_EQ(readlinkat(d, "layers/0/d/l", target, sizeof(target)), 4);
        ASSERT_STREQ(target, "../f");
        ASSERT_OK(fstatat(d, "layers/0/wh", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
        (void)close(fd);
        (void)close(d);
        tree_remove(dest);
}

/* The checksum frame: missing, wrong, or followed by more bytes. */
TEST(import_checksum_frame) {
        Spec specs[] = {ROOT, FILE_F, {NULL}};
        struct stat st;
        int fd;

        fd = archive_make(MANIFEST(2, F_HELLO), specs, MAKE_ZSTD);
        import_expect_fail(fd, EBADMSG, "does not end with its checksum", "no frame");
        ASSERT_OK(fstat(fd, &st));
        sum_frame_append(fd, (size_t)st.st_size - 1); /* over the last byte */
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        import_expect_fail(fd, EBADMSG, NULL, "frame over the last byte");
        (void)close(fd);

        fd = archive_make(MANIFEST(2, F_HELLO), specs, MAKE_ZSTD | MAKE_SUM);
        ASSERT_OK(fstat(fd, &st));
        ASSERT_EQ(pwrite(fd, "x", 1, st.st_size - 1), 1); /* in the checksum */
        import_expect_fail(fd, EBADMSG, "its checksum does not match", "wrong checksum");
        ASSERT_EQ(pwrite(fd, "\0", 1, st.st_size), 1); /* after the frame */
        import_expect_fail(fd, EBADMSG, NULL, "trailing byte");
        (void)close(fd);
}

TEST(import_bad_archives) {
        for (size_t i = 0; i < ELEMENTSOF(bad_cases); i++) {
                const BadCase *c = &bad_cases[i];
                int fd = archive_make(c->manifest, c->specs, MAKE_ZSTD | MAKE_SUM);

                import_expect_fail(fd, c->err, c->msg, c->name);
                (void)close(fd);
        }
}

/* The manifest's refusals word for word, with their pointers: format and
 * version first (a newer archive is told so, whatever else it holds), then
 * each layer's keys and members in a fixed order; members the manifest does
 * not define are the exporter's caller's and pass. */
#define MANIFEST_OF(top, layer)                                                                    \
        "{" top "\"layers\": [{\"dir\": \"layers/0\", \"entries\": 2, \"files\": {" F_HELLO        \
        "}" layer "}]}"
#define V1 "\"format\": \"hutch-snapshot\", \"format_version\": 1, "
TEST(import_manifest_refusals) {
        static const struct {
                const char *manifest;
                int err; /* 0: imported */
                const char *msg, *pointer;
        } cases[] = {
                {MANIFEST_OF(V1 "\"name\": \"t\", \"created\": 5, ", ""), 0},
                {MANIFEST_OF(V1, ""), 0},
                {MANIFEST_OF("\"format\": \"hutch-snapshot\", \"format_version\": 2, ", ""),
                 EPROTONOSUPPORT,
                 "snapshot format_version 2 is not supported: this hutch reads format_version 1",
                 "/format_version"},
                /* A newer version's layers may hold keys this one does not know. */
                {MANIFEST_OF("\"format\": \"hutch-snapshot\", \"format_version\": 2, ",
                             ", \"mode\": 1"),
                 EPROTONOSUPPORT,
                 "snapshot format_version 2 is not supported: this hutch reads format_version 1",
                 "/format_version"},
                {MANIFEST_OF(V1, ", \"mode\": 1"), EINVAL,
                 "snapshot manifest: /layers/0: unknown key 'mode'", "/layers/0/mode"},
                {MANIFEST_OF("\"format_version\": 2, \"format\": \"tar\", ", ""), EINVAL,
                 "not a hutch snapshot: the manifest's \"format\" is not \"hutch-snapshot\"",
                 "/format"},
                {MANIFEST_OF("\"format_version\": 2, ", ""), EINVAL,
                 "not a hutch snapshot: the manifest's \"format\" is not \"hutch-snapshot\"",
                 "/format"},
                {MANIFEST_OF("\"format\": \"hutch-snapshot\", \"format_version\": 1.0, ", ""),
                 EINVAL, "snapshot manifest: \"format_version\" must be an integer",
                 "/format_version"},
                {"{" V1 "\"layers\": {}}", EINVAL, "snapshot manifest: \"layers\" must be an array",
                 "/layers"},
                {"{\"format\": \"hutch-snapshot\", \"format_version\": 1}", EINVAL,
                 "snapshot manifest: \"layers\" must be an array", "/layers"},
                {"{" V1 "\"layers\": [1]}", EINVAL,
                 "snapshot manifest: /layers/0: must be an object", "/layers/0"},
                /* An unknown key is found before a bad member, wherever it is. */
                {"{" V1 "\"layers\": [{\"dir\": \"x\", \"mode\": 1}]}", EINVAL,
                 "snapshot manifest: /layers/0: unknown key 'mode'", "/layers/0/mode"},
                {"{" V1 "\"layers\": [{\"entries\": 2, \"files\": {}}]}", EINVAL,
                 "snapshot manifest: /layers/0/dir: must be the string \"layers/<index>\"",
                 "/layers/0/dir"},
                {"{" V1 "\"layers\": [{\"dir\": \"layers/0\", \"entries\": \"2\", \"files\": {}}]}",
                 EINVAL,
                 "snapshot manifest: /layers/0/entries: must be an integer from 1 to "
                 "SNAPSHOT_ARCHIVE_ENTRIES_MAX",
                 "/layers/0/entries"},
                {"{" V1 "\"layers\": [{\"dir\": \"layers/0\", \"entries\": 2, \"files\": []}]}",
                 EINVAL, "snapshot manifest: /layers/0/files: must be an object",
                 "/layers/0/files"},
                /* "files" is checked against "entries", whichever comes first. */
                {"{" V1 "\"layers\": [{\"files\": {" F_HELLO "}, \"entries\": 1, \"dir\": "
                 "\"layers/0\"}]}",
                 EINVAL,
                 "snapshot manifest: /layers/0/files: lists more files than the layer has "
                 "entries besides its root",
                 "/layers/0/files"},
        };
        static const Spec specs[] = {ROOT, FILE_F, {NULL}};

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *manifest = NULL;
                char *dest = tmpdir_new();
                int d = dir_open(AT_FDCWD, dest), r;
                int fd = archive_make(cases[i].manifest, specs, MAKE_ZSTD | MAKE_SUM);
                HutchError err = {};

                r = snapshot_archive_import(fd, d, &manifest, &err);
                if (cases[i].err == 0 ? r < 0
                                      : r != -cases[i].err || strcmp(err.msg, cases[i].msg) != 0 ||
                                                strcmp(err.pointer, cases[i].pointer) != 0)
                        fail_msg("%s: r=%d '%s' at '%s', expected -%d '%s' at '%s'",
                                 cases[i].manifest, r, err.msg, err.pointer, cases[i].err,
                                 cases[i].msg, cases[i].pointer);
                ASSERT_OK(snapshot_archive_clear(d));
                (void)close(d);
                (void)close(fd);
                ASSERT_OK(rmdir(dest));
                free(dest);
        }
}

TEST(import_bounds) {
        Spec deep[2] = {{NULL}}, long_path[2] = {{NULL}};
        char path[SNAPSHOT_ARCHIVE_PATH_MAX + 64];
        size_t n = 0;
        char *big;
        int fd;

        /* One component too deep. */
        n = (size_t)snprintf(path, sizeof(path), "layers/0");
        for (int i = 0; i <= SNAPSHOT_ARCHIVE_DEPTH_MAX; i++)
                n += (size_t)snprintf(path + n, sizeof(path) - n, "/d");
        deep[0] = (Spec){path, AE_IFDIR};
        fd = archive_make(MANIFEST(2, ""), deep, MAKE_ZSTD | MAKE_SUM);
        import_expect_fail(fd, ELOOP, "deeper than SNAPSHOT_ARCHIVE_DEPTH_MAX", "deep");
        (void)close(fd);

        /* One byte too long below the layer. */
        n = (size_t)snprintf(path, sizeof(path), "layers/0/");
        while (n < 9 + SNAPSHOT_ARCHIVE_PATH_MAX + 1)
                n += (size_t)snprintf(
                        path + n, sizeof(path) - n, "%.*s/", 200,
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        path[9 + SNAPSHOT_ARCHIVE_PATH_MAX + 1] = '\0';
        long_path[0] = (Spec){path, AE_IFDIR};
        fd = archive_make(MANIFEST(2, ""), long_path, MAKE_ZSTD | MAKE_SUM);
        import_expect_fail(fd, ENAMETOOLONG, "longer than", "long path");
        (void)close(fd);

        /* A manifest one byte over the limit is refused before it is read. */
        big = malloc(SNAPSHOT_ARCHIVE_MANIFEST_MAX + 2);
        ASSERT_NOT_NULL(big);
        memset(big, ' ', SNAPSHOT_ARCHIVE_MANIFEST_MAX + 1);
        big[SNAPSHOT_ARCHIVE_MANIFEST_MAX + 1] = '\0';
        {
                Spec none[1] = {{NULL}};

                fd = archive_make(big, none, MAKE_ZSTD | MAKE_SUM);
        }
        free(big);
        import_expect_fail(fd, EFBIG, "'manifest.json' is larger than", "big manifest");
        (void)close(fd);
}

TEST(import_refuses_plain_tar) {
        Spec specs[] = {ROOT, FILE_F, {NULL}};
        int fd = archive_make(MANIFEST(2, F_HELLO), specs, MAKE_SUM);

        import_expect_fail(fd, EBADMSG, "not zstd-compressed", "plain tar");
        (void)close(fd);
}

TEST(import_into_non_empty_dir) {
        HutchError err = {};
        char *dest = tmpdir_new();
        Spec specs[] = {ROOT, FILE_F, {NULL}};
        int d = dir_open(AT_FDCWD, dest),
            fd = archive_make(MANIFEST(2, F_HELLO), specs, MAKE_ZSTD | MAKE_SUM);

        file_write(d, "stray", "", 0, 0644);
        ASSERT_ERROR(snapshot_archive_import(fd, d, NULL, &err), EEXIST);
        ASSERT_MSG(err, "must be an empty directory");
        ASSERT_ERROR(snapshot_archive_import(-EBADF, d, NULL, &err), EINVAL);
        (void)close(fd);
        (void)close(d);
        tree_remove(dest);
}

/* Import reads sequentially: a pipe works. */
TEST(import_from_pipe) {
        _cleanup_free_ char *manifest = NULL;
        Expect x = {.keep_ids = geteuid() == 0, .uid = geteuid(), .gid = getegid()};
        HutchError err = {};
        char *dest = tmpdir_new();
        int p[2], d = dir_open(AT_FDCWD, dest), fd, status;
        Layers ls;
        pid_t pid;

        layers_make(&ls);
        fd = export_layers(&ls, &err);
        ASSERT_OK(pipe2(p, O_CLOEXEC));
        pid = fork();
        ASSERT_OK(pid);
        if (pid == 0) {
                char buf[65536];
                ssize_t n;

                (void)close(p[0]);
                while ((n = read(fd, buf, sizeof(buf))) > 0)
                        if (loop_write(p[1], buf, (size_t)n) < 0)
                                _exit(1);
                _exit(n < 0);
        }
        (void)close(p[1]);
        ASSERT_OK(snapshot_archive_import(p[0], d, &manifest, &err));
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ASSERT_EQ(layer_compare(&ls, 0, d, &x), 24);
        ASSERT_EQ(layer_compare(&ls, 1, d, &x), 13);
        (void)close(p[0]);
        (void)close(fd);
        (void)close(d);
        tree_remove(dest);
        layers_done(&ls);
}

/* Without root, everything belongs to the caller, read-only directories
 * are still filled, and snapshot_archive_clear() can remove them. As root
 * this runs in a child that became nobody. */
TEST(import_unprivileged) {
        Expect x = {.keep_ids = false, .uid = NOBODY, .gid = NOBODY};
        HutchError err = {};
        char *dest = tmpdir_new(), *dest2 = tmpdir_new();
        int d = dir_open(AT_FDCWD, dest), d2 = dir_open(AT_FDCWD, dest2), fd, status;
        Layers ls;
        pid_t pid;

        layers_make(&ls);
        fd = export_layers(&ls, &err);
        if (geteuid() != 0) {
                x.uid = geteuid();
                x.gid = getegid();
        } else {
                ASSERT_OK(fchown(d, NOBODY, NOBODY));
                ASSERT_OK(fchown(d2, NOBODY, NOBODY));
        }
        pid = fork();
        ASSERT_OK(pid);
        if (pid == 0) {
                if (geteuid() == 0 &&
                    (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
                     setresuid(NOBODY, NOBODY, NOBODY) < 0))
                        _exit(10);
                if (snapshot_archive_import(fd, d, NULL, &err) < 0)
                        _exit(11);
                if (lseek(fd, 0, SEEK_SET) < 0 || snapshot_archive_import(fd, d2, NULL, &err) < 0)
                        _exit(12);
                if (snapshot_archive_clear(d2) < 0)
                        _exit(13);
                _exit(0);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
        ASSERT_EQ(layer_compare(&ls, 0, d, &x), 24);
        ASSERT_EQ(layer_compare(&ls, 1, d, &x), 13);
        ASSERT_EQ(rmdir(dest2), 0); /* emptied by the unprivileged clear */
        free(dest2);
        (void)close(d2);
        (void)close(fd);
        (void)close(d);
        tree_remove(dest);
        layers_done(&ls);
}

DEFINE_TEST_MAIN

/* Of overlayfs's user.overlay.* (obeyed by the kernel with userxattr),
 * only what describes a layer's content may travel in an archive. */
TEST(xattr_allowed) {
        ASSERT_TRUE(snapshot_archive_xattr_allowed("user.custom"));
        ASSERT_TRUE(snapshot_archive_xattr_allowed("user.overlay.opaque"));
        ASSERT_TRUE(snapshot_archive_xattr_allowed("user.overlay.whiteout"));
        ASSERT_TRUE(snapshot_archive_xattr_allowed("user.overlayfoo"));
        ASSERT_FALSE(snapshot_archive_xattr_allowed("user.overlay.redirect"));
        ASSERT_FALSE(snapshot_archive_xattr_allowed("user.overlay.metacopy"));
        ASSERT_FALSE(snapshot_archive_xattr_allowed("user.overlay.origin"));
        ASSERT_FALSE(snapshot_archive_xattr_allowed("user.overlay.opaque2"));
        ASSERT_FALSE(snapshot_archive_xattr_allowed("trusted.overlay.opaque"));
        ASSERT_FALSE(snapshot_archive_xattr_allowed("security.capability"));
        ASSERT_FALSE(snapshot_archive_xattr_allowed("user"));
}
