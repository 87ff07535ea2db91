/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "copy.h"
#include "fd-util.h"
#include "rm-rf.h"
#include "store/diff.h"
#include "store/layers.h"
#include "store/store-internal.h"
#include "strv.h"
#include "test.h"

/* ---- fixture: a temporary root with a host folder, three layers and a
 * directory outside them all ---- */

#define N_LAYERS 3

typedef struct Fx {
        char *root;
        int root_fd, host, outside;
        int l[N_LAYERS];
} Fx;

static int open_dir(int dirfd, const char *path) {
        int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                fail_msg("open '%s': %s", path, strerror(errno));
        return fd;
}

static void mkd(int dirfd, const char *path) {
        if (mkdirat(dirfd, path, 0755) < 0 || fchmodat(dirfd, path, 0755, 0) < 0)
                fail_msg("mkdir '%s': %s", path, strerror(errno));
}

static void fx_init(Fx *fx) {
        char t[] = "/tmp/hutch-test-layers-XXXXXX";
        static const char *const names[N_LAYERS] = {"l0", "l1", "l2"};

        if (!mkdtemp(t))
                fail_msg("mkdtemp: %s", strerror(errno));
        fx->root = strdup(t);
        ASSERT_NOT_NULL(fx->root);
        fx->root_fd = open_dir(AT_FDCWD, t);
        mkd(fx->root_fd, "host");
        mkd(fx->root_fd, "outside");
        fx->host = open_dir(fx->root_fd, "host");
        fx->outside = open_dir(fx->root_fd, "outside");
        for (size_t i = 0; i < N_LAYERS; i++) {
                mkd(fx->root_fd, names[i]);
                fx->l[i] = open_dir(fx->root_fd, names[i]);
        }
}

static void fx_done(Fx *fx) {
        for (size_t i = 0; i < N_LAYERS; i++)
                (void)safe_close(fx->l[i]);
        (void)safe_close(fx->host);
        (void)safe_close(fx->outside);
        (void)safe_close(fx->root_fd);
        if (fx->root)
                (void)rm_rf_at(AT_FDCWD, fx->root); /* deeper than ws_remove_at() goes */
        free(fx->root);
}
#define _cleanup_fx_ _cleanup_(fx_done)

static void put_mode(int dirfd, const char *path, const char *content, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                fail_msg("create '%s': %s", path, strerror(errno));
        ASSERT_OK(loop_write(fd, content, strlen(content)));
        ASSERT_OK(fchmod(fd, mode));
}

static void put(int dirfd, const char *path, const char *content) {
        put_mode(dirfd, path, content, 0644);
}

static char *get(int dirfd, const char *path) {
        char *s = NULL;
        int r = read_full_file_at(dirfd, path, O_NOFOLLOW, 1 << 20, &s);

        if (r < 0)
                fail_msg("read '%s': %s", path, strerror(-r));
        return s;
}

static bool exists(int dirfd, const char *path) {
        struct stat st;

        return fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void whiteout(int dirfd, const char *path) {
        if (mknodat(dirfd, path, S_IFCHR, makedev(0, 0)) < 0)
                fail_msg("mknod '%s': %s", path, strerror(errno));
}

static void set_xattr(int dirfd, const char *path, const char *name, const char *value) {
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        if (fsetxattr(fd, name, value, strlen(value), 0) < 0)
                fail_msg("setxattr '%s' on '%s': %s", name, path, strerror(errno));
}

/* A node that is neither file, directory nor symlink: a device as root,
 * else a socket (which anyone may create). */
static void special_node(int dirfd, const char *path) {
        if (geteuid() == 0)
                ASSERT_OK(mknodat(dirfd, path, S_IFCHR | 0644, makedev(1, 3)));
        else
                ASSERT_OK(mknodat(dirfd, path, S_IFSOCK | 0644, 0));
}

static void lnk(int dirfd, const char *path, const char *target) {
        ASSERT_OK(symlinkat(target, dirfd, path));
}

static char *changes_str(const WsChange *c, size_t n) {
        char *s = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&s, &len);

        ASSERT_NOT_NULL(f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%c %s %s\n", "AMD"[c[i].kind], ws_entry_type_to_string(c[i].type),
                        c[i].path);
        ASSERT_EQ(fclose(f), 0);
        return s;
}

/* The diff of @n layers over the host, one "K type path" line per change. */
static char *diff_str(const int *layers, size_t n, int host) {
        WsChange *c = NULL;
        size_t k = 0;
        HutchError e = {};
        char *s;
        int r;

        r = ws_diff(layers, n, host, &c, &k, &e);
        if (r < 0)
                fail_msg("ws_diff: %s", e.msg);
        s = changes_str(c, k);
        ws_changes_free(c, k);
        return s;
}

static WsManifest *manifest_of(int host) {
        WsManifest *m = NULL;
        HutchError e = {};

        if (ws_manifest_scan(host, &m, &e) < 0)
                fail_msg("ws_manifest_scan: %s", e.msg);
        return m;
}

/* ---- names, paths, escaping ---- */

TEST(enum_strings_round_trip) {
        for (int k = 0; k < _WS_CHANGE_KIND_MAX; k++)
                ASSERT_EQ(ws_change_kind_from_string(ws_change_kind_to_string(k)), k);
        for (int t = 0; t < _WS_ENTRY_TYPE_MAX; t++)
                ASSERT_EQ(ws_entry_type_from_string(ws_entry_type_to_string(t)), t);
        ASSERT_STREQ(ws_change_kind_to_string(WS_CHANGE_DELETED), "deleted");
        ASSERT_STREQ(ws_entry_type_to_string(WS_ENTRY_SYMLINK), "symlink");
        ASSERT_NULL(ws_change_kind_to_string(_WS_CHANGE_KIND_MAX));
        ASSERT_NULL(ws_entry_type_to_string(_WS_ENTRY_TYPE_INVALID));
        ASSERT_ERROR(ws_change_kind_from_string("changed"), EINVAL);
        ASSERT_ERROR(ws_entry_type_from_string(NULL), EINVAL);
}

TEST(path_is_valid) {
        ASSERT_TRUE(ws_path_is_valid("a"));
        ASSERT_TRUE(ws_path_is_valid("a/b c/\xff\n"));
        ASSERT_TRUE(ws_path_is_valid("..a/.b"));
        ASSERT_FALSE(ws_path_is_valid(""));
        ASSERT_FALSE(ws_path_is_valid("/a"));
        ASSERT_FALSE(ws_path_is_valid("a/"));
        ASSERT_FALSE(ws_path_is_valid("a//b"));
        ASSERT_FALSE(ws_path_is_valid("a/./b"));
        ASSERT_FALSE(ws_path_is_valid(".."));
        ASSERT_FALSE(ws_path_is_valid("a/.."));
        ASSERT_FALSE(ws_path_is_valid(NULL));
}

TEST(path_escape) {
        _cleanup_free_ char *e = NULL;

        ASSERT_OK(ws_path_escape("a b/\n\t\r\\\x1b[31m\xff\x7f~", &e));
        ASSERT_STREQ(e, "a b/\\n\\t\\r\\\\\\x1b[31m\\xff\\x7f~");
}

/* ---- diff ---- */

TEST(diff_add_modify_delete_identical) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL;

        fx_init(&fx);
        put(fx.host, "a.txt", "a\n");
        put(fx.host, "b.txt", "b\n");
        put(fx.host, "same.txt", "same\n");
        mkd(fx.host, "d");
        put(fx.host, "d/x", "x\n");
        lnk(fx.host, "link", "a.txt");

        put(fx.l[0], "a.txt", "A\n");       /* modified */
        whiteout(fx.l[0], "b.txt");         /* deleted */
        put(fx.l[0], "new.txt", "new\n");   /* added */
        put(fx.l[0], "same.txt", "same\n"); /* copied up, identical */
        mkd(fx.l[0], "d");                  /* merged with the host's */
        put(fx.l[0], "d/y", "y\n");         /* added below it */
        lnk(fx.l[0], "link", "a.txt");      /* copied up, identical */
        whiteout(fx.l[0], "never-existed"); /* deletes nothing */

        s = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(s, "M file a.txt\n"
                        "D file b.txt\n"
                        "A file d/y\n"
                        "A file new.txt\n");
}

TEST(diff_mode_and_target_changes) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL;

        fx_init(&fx);
        put(fx.host, "script", "#!/bin/sh\n");
        put(fx.host, "size", "1234\n");
        lnk(fx.host, "link", "one");
        mkd(fx.host, "d");
        mkd(fx.host, "same-dir");

        put_mode(fx.l[0], "script", "#!/bin/sh\n", 0755); /* mode only */
        put(fx.l[0], "size", "1235\n");                   /* same size, other bytes */
        lnk(fx.l[0], "link", "two");
        mkd(fx.l[0], "d");
        ASSERT_OK(fchmodat(fx.l[0], "d", 0700, 0));
        mkd(fx.l[0], "same-dir");
        /* Only the mtime differs: no change. */
        ASSERT_OK(utimensat(fx.l[0], "same-dir", (struct timespec[2]){{0, 0}, {12345, 0}},
                            AT_SYMLINK_NOFOLLOW));

        s = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(s, "M dir d\n"
                        "M symlink link\n"
                        "M file script\n"
                        "M file size\n");
}

TEST(diff_opaque_dir_hides_host) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL, *s2 = NULL;

        fx_init(&fx);
        mkd(fx.host, "d");
        put(fx.host, "d/x", "x\n");
        mkd(fx.host, "d/sub");
        put(fx.host, "d/sub/z", "z\n");
        put(fx.host, "d/kept", "kept\n");

        mkd(fx.l[0], "d");
        set_xattr(fx.l[0], "d", LAYER_XATTR_OPAQUE, "y");
        put(fx.l[0], "d/new", "new\n");
        put(fx.l[0], "d/kept", "kept\n"); /* re-created identical: no change */

        s = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(s, "A file d/new\n"
                        "D dir d/sub\n"
                        "D file d/sub/z\n"
                        "D file d/x\n");

        /* "x" marks a directory holding xattr whiteouts: not opaque. */
        set_xattr(fx.l[0], "d", LAYER_XATTR_OPAQUE, "x");
        put_mode(fx.l[0], "d/x", "", 0644);
        set_xattr(fx.l[0], "d/x", LAYER_XATTR_WHITEOUT, "");
        s2 = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(s2, "A file d/new\n"
                         "D file d/x\n");
}

TEST(diff_whiteout_of_directory_lists_contents) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL;

        fx_init(&fx);
        mkd(fx.host, "gone");
        put(fx.host, "gone/a", "a\n");
        mkd(fx.host, "gone/b");
        lnk(fx.host, "gone/b/l", "/etc/passwd");
        whiteout(fx.l[0], "gone");

        s = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(s, "D dir gone\n"
                        "D file gone/a\n"
                        "D dir gone/b\n"
                        "D symlink gone/b/l\n");
}

TEST(diff_type_changes) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL;

        fx_init(&fx);
        put(fx.host, "f", "file\n");
        mkd(fx.host, "g");
        put(fx.host, "g/k", "k\n");
        /* File to directory: overlayfs makes such a directory opaque. */
        mkd(fx.l[0], "f");
        set_xattr(fx.l[0], "f", LAYER_XATTR_OPAQUE, "y");
        put(fx.l[0], "f/inner", "inner\n");
        /* Directory to symlink. */
        lnk(fx.l[0], "g", "f");

        s = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(s, "D file f\n"
                        "A dir f\n"
                        "A file f/inner\n"
                        "D dir g\n"
                        "A symlink g\n"
                        "D file g/k\n");
}

TEST(diff_special_files_are_not_content) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL;

        fx_init(&fx);
        ASSERT_OK(mkfifoat(fx.host, "host-fifo", 0644));
        ASSERT_OK(mkfifoat(fx.l[0], "fifo", 0644));
        special_node(fx.l[0], "null");
        put_mode(fx.l[0], "empty", "", 0644); /* zero size, no whiteout xattr */

        s = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(s, "A file empty\n");
}

TEST(diff_multi_layer_stacking) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL;
        WsChange *c = NULL;
        size_t n = 0;

        fx_init(&fx);
        put(fx.host, "a", "host\n");
        put(fx.host, "b", "b\n");
        put(fx.host, "c", "c\n");

        /* l2 (lowest snapshot): adds e/one and tmp, deletes b, modifies c. */
        mkd(fx.l[2], "e");
        put(fx.l[2], "e/one", "1\n");
        put(fx.l[2], "tmp", "tmp\n");
        whiteout(fx.l[2], "b");
        put(fx.l[2], "c", "c2\n");
        mkd(fx.l[2], "hidden");
        put(fx.l[2], "hidden/w", "w\n");
        /* l1: modifies a, brings b back as it was, deletes tmp again. */
        put(fx.l[1], "a", "l1\n");
        put(fx.l[1], "b", "b\n");
        whiteout(fx.l[1], "tmp");
        /* l0 (top): adds e/two next to l2's e/one, replaces hidden opaquely,
         * and a whiteout below a directory stops the lookup there. */
        mkd(fx.l[0], "e");
        put(fx.l[0], "e/two", "2\n");
        mkd(fx.l[0], "hidden");
        set_xattr(fx.l[0], "hidden", LAYER_XATTR_OPAQUE, "y");
        put(fx.l[0], "hidden/z", "z\n");

        s = diff_str(fx.l, 3, fx.host);
        ASSERT_STREQ(s, "M file a\n"
                        "M file c\n"
                        "A dir e\n"
                        "A file e/one\n"
                        "A file e/two\n"
                        "A dir hidden\n"
                        "A file hidden/z\n");
        ASSERT_OK(ws_diff(fx.l, 3, fx.host, &c, &n, NULL));
        ASSERT_EQ(n, 7);
        ASSERT_EQ(c[0].layer, 1); /* a */
        ASSERT_EQ(c[1].layer, 2); /* c */
        ASSERT_EQ(c[2].layer, 0); /* e: the topmost directory */
        ASSERT_EQ(c[3].layer, 2); /* e/one */
        ASSERT_EQ(c[4].layer, 0); /* e/two */
        ws_changes_free(c, n);

        /* The same stack without its top. */
        free(s);
        s = diff_str(fx.l + 1, 2, fx.host);
        ASSERT_STREQ(s, "M file a\n"
                        "M file c\n"
                        "A dir e\n"
                        "A file e/one\n"
                        "A dir hidden\n"
                        "A file hidden/w\n");
}

TEST(diff_caps) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_close_ int d = -EBADF;
        char name[256];
        HutchError e = {};
        WsChange *c = NULL;
        size_t n = 0;

        fx_init(&fx);
        /* Deeper than WS_MAX_DEPTH. */
        d = fcntl(fx.l[0], F_DUPFD_CLOEXEC, 3);
        for (int i = 0; i <= WS_MAX_DEPTH + 1; i++) {
                int next;

                mkd(d, "d");
                next = open_dir(d, "d");
                (void)close(d);
                d = next;
        }
        ASSERT_ERROR(ws_diff(fx.l, 1, fx.host, &c, &n, &e), ELOOP);
        ASSERT_TRUE(strstr(e.msg, "deeper") != NULL);

        /* A path longer than WS_PATH_MAX. */
        d = safe_close(d);
        memset(name, 'n', 250);
        name[250] = '\0';
        d = fcntl(fx.l[1], F_DUPFD_CLOEXEC, 3);
        for (int i = 0; i < 17; i++) {
                int next;

                mkd(d, name);
                next = open_dir(d, name);
                (void)close(d);
                d = next;
        }
        ASSERT_ERROR(ws_diff(fx.l + 1, 1, fx.host, &c, &n, &e), ENAMETOOLONG);

        /* More layers than WS_MAX_LAYERS. */
        ASSERT_ERROR(ws_diff(fx.l, WS_MAX_LAYERS + 1, fx.host, &c, &n, &e), E2BIG);
}

/* ---- output ---- */

TEST(print_stat_and_json) {
        WsChange c[] = {
                {.path = (char *)"dir", .kind = WS_CHANGE_ADDED, .type = WS_ENTRY_DIR},
                {.path = (char *)"dir/f\n\x1b", .kind = WS_CHANGE_ADDED, .type = WS_ENTRY_FILE},
                {.path = (char *)"m", .kind = WS_CHANGE_MODIFIED, .type = WS_ENTRY_SYMLINK},
                {.path = (char *)"z\xff", .kind = WS_CHANGE_DELETED, .type = WS_ENTRY_FILE},
        };
        _cleanup_free_ char *s = NULL, *js = NULL;
        size_t len = 0;
        json_t *j = NULL;
        FILE *f;

        f = open_memstream(&s, &len);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(ws_diff_print_stat(f, c, ELEMENTSOF(c)));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_STREQ(s, "A dir/\n"
                        "A dir/f\\n\\x1b\n"
                        "M m\n"
                        "D z\\xff\n"
                        "4 changes: 2 added, 1 modified, 1 deleted\n");
        free(s);
        s = NULL;
        f = open_memstream(&s, &len);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(ws_diff_print_stat(f, c, 0));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_STREQ(s, "no changes\n");

        ASSERT_OK(ws_diff_to_json(c, ELEMENTSOF(c), &j));
        js = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        ASSERT_STREQ(js, "[{\"path\":\"dir\",\"kind\":\"added\",\"type\":\"dir\"},"
                         "{\"path\":\"dir/f\\n\\u001B\",\"kind\":\"added\",\"type\":\"file\"},"
                         "{\"path\":\"m\",\"kind\":\"modified\",\"type\":\"symlink\"},"
                         "{\"path\":\"z\\\\xff\",\"path_hex\":\"7aff\",\"kind\":\"deleted\","
                         "\"type\":\"file\"}]");
        c[0].kind = _WS_CHANGE_KIND_MAX;
        ASSERT_ERROR(ws_diff_to_json(c, 1, &j), EINVAL);
}

static char *patch_of(const int *layers, size_t n_layers, int host) {
        _cleanup_close_ int fd = -EBADF;
        WsChange *c = NULL;
        size_t n = 0;
        HutchError e = {};
        char *s = NULL;

        ASSERT_OK(ws_diff(layers, n_layers, host, &c, &n, NULL));
        fd = memfd_create("patch", MFD_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        if (ws_diff_write_patch(layers, n_layers, host, c, n, fd, &e) < 0)
                fail_msg("ws_diff_write_patch: %s", e.msg);
        ws_changes_free(c, n);
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        ASSERT_OK(read_full_fd(fd, 1 << 20, &s, NULL));
        return s;
}

TEST(unified_patch) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *s = NULL;

        fx_init(&fx);
        put(fx.host, "mod", "one\ntwo\n");
        put(fx.host, "del", "gone\n");
        put(fx.host, "bin", "x");
        mkd(fx.host, "dir");
        put(fx.l[0], "mod", "one\nTWO\n");
        whiteout(fx.l[0], "del");
        put(fx.l[0], "new\nline", "fresh\n");
        {
                _cleanup_close_ int fd =
                        openat(fx.l[0], "bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

                ASSERT_OK(loop_write(fd, "a\0b", 3));
        }
        lnk(fx.l[0], "link", "mod"); /* not in the patch */
        whiteout(fx.l[0], "dir");    /* not in the patch */
        /* Mode changes, as git shows them (issue 26 item 3). */
        put(fx.host, "exe", "same\n");
        put_mode(fx.l[0], "exe", "same\n", 0777);
        mkd(fx.host, "pub");
        mkd(fx.l[0], "pub");
        ASSERT_OK(fchmodat(fx.l[0], "pub", 01777, 0));

        s = patch_of(fx.l, 1, fx.host);
        ASSERT_STREQ(s, "diff --git a/bin b/bin\n"
                        "Binary files a/bin and b/bin differ\n"
                        "diff --git a/del b/del\n"
                        "deleted file mode 100644\n"
                        "--- a/del\n"
                        "+++ /dev/null\n"
                        "@@ -1 +0,0 @@\n"
                        "-gone\n"
                        "diff --git a/exe b/exe\n"
                        "old mode 100644\n"
                        "new mode 100777\n"
                        "diff --git a/mod b/mod\n"
                        "--- a/mod\n"
                        "+++ b/mod\n"
                        "@@ -1,2 +1,2 @@\n"
                        " one\n"
                        "-two\n"
                        "+TWO\n"
                        "diff --git a/new\\nline b/new\\nline\n"
                        "new file mode 100644\n"
                        "--- /dev/null\n"
                        "+++ b/new\\nline\n"
                        "@@ -0,0 +1 @@\n"
                        "+fresh\n"
                        "diff --git a/pub b/pub\n"
                        "old mode 040755\n"
                        "new mode 041777\n");
}

/* ---- manifest ---- */

static void assert_manifests_equal(const WsManifest *a, const WsManifest *b) {
        ASSERT_EQ(ws_manifest_size(a), ws_manifest_size(b));
        for (size_t i = 0; i < ws_manifest_size(a); i++) {
                const WsManifestEntry *x = ws_manifest_entry(a, i), *y = ws_manifest_entry(b, i);

                ASSERT_STREQ(x->path, y->path);
                ASSERT_EQ(x->type, y->type);
                ASSERT_EQ(x->mode, y->mode);
                ASSERT_EQ(x->size, y->size);
                ASSERT_EQ(x->mtime_ns, y->mtime_ns);
        }
}

static int memfd_with(const void *data, size_t len) {
        int fd = memfd_create("manifest", MFD_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, data, len));
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        return fd;
}

TEST(manifest_round_trip_weird_names) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *scanned = NULL, *loaded = NULL;
        _cleanup_close_ int fd = -EBADF;
        const WsManifestEntry *e;
        HutchError err = {};

        fx_init(&fx);
        put(fx.host, "new\nline", "nl\n");
        put_mode(fx.host, "\xff\xfe bytes", "ff", 0600);
        put(fx.host, "sp ace", "");
        mkd(fx.host, "d");
        put(fx.host, "d/x", "xyz");
        lnk(fx.host, "d/link", "../new\nline");
        ASSERT_OK(mkfifoat(fx.host, "fifo", 0640));
        ASSERT_OK(utimensat(fx.host, "sp ace", (struct timespec[2]){{0, 0}, {-5, 7}},
                            AT_SYMLINK_NOFOLLOW));

        fd = memfd_create("manifest", MFD_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(ws_manifest_write(fx.host, fd, &err));
        ASSERT_OK(lseek(fd, 0, SEEK_SET));
        ASSERT_OK(ws_manifest_load(fd, &loaded, &err));
        scanned = manifest_of(fx.host);
        ASSERT_EQ(ws_manifest_size(loaded), 7);
        assert_manifests_equal(scanned, loaded);

        e = ws_manifest_lookup(loaded, "new\nline");
        ASSERT_NOT_NULL(e);
        ASSERT_EQ(e->type, WS_ENTRY_FILE);
        ASSERT_EQ(e->size, 3);
        e = ws_manifest_lookup(loaded, "\xff\xfe bytes");
        ASSERT_NOT_NULL(e);
        ASSERT_EQ(e->mode, 0600);
        e = ws_manifest_lookup(loaded, "sp ace");
        ASSERT_NOT_NULL(e);
        ASSERT_EQ(e->mtime_ns, -5 * 1000000000LL + 7);
        ASSERT_EQ(ws_manifest_lookup(loaded, "d/link")->type, WS_ENTRY_SYMLINK);
        ASSERT_EQ(ws_manifest_lookup(loaded, "d")->type, WS_ENTRY_DIR);
        ASSERT_EQ(ws_manifest_lookup(loaded, "fifo")->type, WS_ENTRY_OTHER);
        ASSERT_NULL(ws_manifest_lookup(loaded, "d/nope"));
        ASSERT_NULL(ws_manifest_lookup(loaded, "new"));
        ASSERT_NULL(ws_manifest_entry(loaded, 7));
}

TEST(manifest_load_crafted) {
        /* CRCs computed with Python's zlib.crc32. */
        static const char ok[] = "hutch-ws-manifest 1.7 1 19\n"
                                 "f 420 5 -1500 a\nb\xff\0"
                                 "d9fd5182\n";
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_close_ int fd = memfd_with(ok, sizeof(ok) - 1);
        const WsManifestEntry *e;

        /* A newer minor version is read. */
        ASSERT_OK(ws_manifest_load(fd, &m, NULL));
        e = ws_manifest_lookup(m, "a\nb\xff");
        ASSERT_NOT_NULL(e);
        ASSERT_EQ(e->mtime_ns, -1500);
        ASSERT_EQ(e->mode, 0644);
        ASSERT_EQ(e->size, 5);
}

static int load_bytes(const char *data, size_t len, HutchError *e) {
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_close_ int fd = memfd_with(data, len);

        return ws_manifest_load(fd, &m, e);
}
#define LOAD(s) load_bytes(s, sizeof(s) - 1, &e)

TEST(manifest_load_rejects) {
        HutchError e = {};

        /* The header. */
        ASSERT_ERROR(LOAD(""), EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 0 0"), EBADMSG); /* no newline */
        ASSERT_ERROR(LOAD("hutch-ws-manifesto 1.0 0 0\n00000000\n"), EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 2.0 0 0\n00000000\n"), EPROTONOSUPPORT);
        ASSERT_TRUE(strstr(e.msg, "version") != NULL);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1 0 0\n00000000\n"), EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 -1 0\n00000000\n"), EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 0 0 0\n00000000\n"), EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 99999999 0\n00000000\n"), EFBIG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 0 99999999999\n00000000\n"), EFBIG);
        /* An empty manifest is fine; its CRC is 0. */
        ASSERT_OK(LOAD("hutch-ws-manifest 1.0 0 0\n00000000\n"));

        /* Lengths, checksum and trailing bytes, around a good one. */
        ASSERT_OK(LOAD("hutch-ws-manifest 1.0 1 12\nf 420 1 0 a\0"
                       "abee3f0c\n"));
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 1 12\nf 420 1 0 a\0"
                          "abee3f0d\n"),
                     EBADMSG);
        ASSERT_TRUE(strstr(e.msg, "checksum") != NULL);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 1 12\nf 420 1 0 a\0"
                          "abee3f0c"),
                     EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 1 12\nf 420 1 0 a\0"
                          "abee3f0c\n\n"),
                     EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 1 11\nf 420 1 0 a"
                          "30682509\n"),
                     EBADMSG);
        ASSERT_TRUE(strstr(e.msg, "unterminated") != NULL);

        /* Records: out of order, duplicate, bad path, bad type, bad mode,
         * count mismatch (the count is not under the CRC). */
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 2 24\nf 420 1 0 b\0f 420 1 0 a\0"
                          "26cdc97f\n"),
                     EBADMSG);
        ASSERT_TRUE(strstr(e.msg, "order") != NULL);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 2 24\nf 420 1 0 a\0f 420 1 0 a\0"
                          "5aaceca4\n"),
                     EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 1 15\nf 420 1 0 ../x\0a78e2028\n"), EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 1 12\nq 420 1 0 a\0d36e3b7f\n"), EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 1 14\nf 99999 1 0 a\0"
                          "35513ebb\n"),
                     EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 2 24\nf 420 1 0 b\0f 420 1 0 a\0"
                          "26cdc97f\n"),
                     EBADMSG);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 0 19\nf 420 5 -1500 a\nb\xff\0"
                          "d9fd5182\n"),
                     EBADMSG);
        ASSERT_TRUE(strstr(e.msg, "more records") != NULL);
        ASSERT_ERROR(LOAD("hutch-ws-manifest 1.0 2 19\nf 420 5 -1500 a\nb\xff\0"
                          "d9fd5182\n"),
                     EBADMSG);
        ASSERT_TRUE(strstr(e.msg, "fewer records") != NULL);
}

/* ---- apply ---- */

/* A host folder and a layer with one change of each sort. */
static void build_changes(Fx *fx) {
        put(fx->host, "mod", "old\n");
        put(fx->host, "del", "del\n");
        put(fx->host, "mode", "mode\n");
        mkd(fx->host, "deldir");
        put(fx->host, "deldir/a", "a\n");
        mkd(fx->host, "deldir/sub");
        put(fx->host, "file-to-dir", "f\n");
        lnk(fx->host, "link", "mod");
        mkd(fx->host, "ro");
        put(fx->host, "untouched", "u\n");

        put(fx->l[0], "mod", "new content\n");
        whiteout(fx->l[0], "del");
        put_mode(fx->l[0], "mode", "mode\n", 04711); /* setuid is dropped */
        whiteout(fx->l[0], "deldir");
        mkd(fx->l[0], "file-to-dir");
        set_xattr(fx->l[0], "file-to-dir", LAYER_XATTR_OPAQUE, "y");
        put(fx->l[0], "file-to-dir/x", "x\n");
        lnk(fx->l[0], "link", "/etc/passwd");
        mkd(fx->l[0], "newdir");
        mkd(fx->l[0], "newdir/deep");
        put(fx->l[0], "newdir/deep/f", "deep\n");
        lnk(fx->l[0], "newdir/l", "../../outside");
        mkd(fx->l[0], "ro");
        put(fx->l[0], "ro/inside", "in\n");
        ASSERT_OK(fchmodat(fx->l[0], "ro", 0555, 0));
}

TEST(apply_round_trip) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_free_ char *before = NULL, *after = NULL, *c1 = NULL, *c2 = NULL;
        WsApplyResult res = {};
        HutchError e = {};
        char target[64] = {};
        struct stat st;

        fx_init(&fx);
        build_changes(&fx);
        m = manifest_of(fx.host);
        before = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(before, "D file del\n"
                             "D dir deldir\n"
                             "D file deldir/a\n"
                             "D dir deldir/sub\n"
                             "D file file-to-dir\n"
                             "A dir file-to-dir\n"
                             "A file file-to-dir/x\n"
                             "M symlink link\n"
                             "M file mod\n"
                             "M file mode\n"
                             "A dir newdir\n"
                             "A dir newdir/deep\n"
                             "A file newdir/deep/f\n"
                             "A symlink newdir/l\n"
                             "M dir ro\n"
                             "A file ro/inside\n");
        if (ws_apply(fx.l, 1, fx.host, m, NULL, 0, &res, &e) < 0)
                fail_msg("ws_apply: %s", e.msg);
        ASSERT_NULL(res.conflicts);
        ASSERT_EQ(res.n_applied, 16);
        ws_apply_result_done(&res);

        after = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(after, "");
        c1 = get(fx.host, "mod");
        ASSERT_STREQ(c1, "new content\n");
        c2 = get(fx.host, "file-to-dir/x");
        ASSERT_STREQ(c2, "x\n");
        ASSERT_FALSE(exists(fx.host, "del"));
        ASSERT_FALSE(exists(fx.host, "deldir"));
        ASSERT_OK(fstatat(fx.host, "mode", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, 0711);
        ASSERT_OK(fstatat(fx.host, "ro", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, 0555);
        ASSERT_EQ(readlinkat(fx.host, "link", target, sizeof(target) - 1), 11);
        ASSERT_STREQ(target, "/etc/passwd");
        ASSERT_TRUE(exists(fx.host, "untouched"));
        /* No temporary file is left behind. */
        ASSERT_FALSE(exists(fx.host, ".hutch-apply-0000000000000000"));
        {
                WsManifest *now = manifest_of(fx.host);

                for (size_t i = 0; i < ws_manifest_size(now); i++)
                        ASSERT_TRUE(strstr(ws_manifest_entry(now, i)->path, ".hutch-apply-") ==
                                    NULL);
                ws_manifest_free(now);
        }
}

/* Issue 26 item 3: without WS_APPLY_MODES a sandbox cannot make the
 * user's entries group/other-writable or sticky; with it, it can; the
 * owner's bits apply either way. */
static void apply_modes_case(WsApplyFlags flags) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        WsApplyResult res = {};
        HutchError e = {};
        struct stat st;
        bool modes = flags & WS_APPLY_MODES;

        fx_init(&fx);
        put(fx.host, "f", "f\n");
        put(fx.host, "x", "x\n");
        put_mode(fx.host, "was-open", "o\n", 0666);
        mkd(fx.host, "d");
        m = manifest_of(fx.host);
        put_mode(fx.l[0], "f", "f\n", 0777);
        put_mode(fx.l[0], "x", "x\n", 0755);
        put_mode(fx.l[0], "was-open", "o2\n", 0666);
        put_mode(fx.l[0], "new", "n\n", 0666);
        mkd(fx.l[0], "d");
        ASSERT_OK(fchmodat(fx.l[0], "d", 01777, 0));
        mkd(fx.l[0], "d2");
        ASSERT_OK(fchmodat(fx.l[0], "d2", 0777, 0));
        if (ws_apply(fx.l, 1, fx.host, m, NULL, flags, &res, &e) < 0)
                fail_msg("ws_apply: %s", e.msg);
        ASSERT_OK(fstatat(fx.host, "f", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, modes ? 0777 : 0755);
        ASSERT_OK(fstatat(fx.host, "x", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, 0755);
        ASSERT_OK(fstatat(fx.host, "was-open", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, 0666);
        ASSERT_OK(fstatat(fx.host, "new", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, modes ? 0666 : 0644);
        ASSERT_OK(fstatat(fx.host, "d", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, modes ? 01777 : 0755);
        ASSERT_OK(fstatat(fx.host, "d2", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, modes ? 0777 : 0755);
        if (modes)
                ASSERT_NULL(res.modes_kept);
        else {
                ASSERT_EQ(strv_length(res.modes_kept), 4);
                ASSERT_STREQ(res.modes_kept[0], "'f': mode 0777 kept as 0755");
                ASSERT_STREQ(res.modes_kept[1], "'new': mode 0666 kept as 0644");
                ASSERT_STREQ(res.modes_kept[2], "'d2': mode 0777 kept as 0755");
                ASSERT_STREQ(res.modes_kept[3], "'d': mode 1777 kept as 0755");
        }
        ws_apply_result_done(&res);
}

TEST(apply_keeps_safe_modes) {
        apply_modes_case(0);
}

TEST(apply_modes_applies_them) {
        apply_modes_case(WS_APPLY_MODES);
}

TEST(apply_conflict_changes_nothing) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL, *before = NULL, *after = NULL;
        _cleanup_free_ char *c = NULL;
        WsApplyResult res = {};
        HutchError e = {};

        fx_init(&fx);
        build_changes(&fx);
        m = manifest_of(fx.host);
        /* The user edits on the host meanwhile: a file the sandbox also
         * changed, one it did not (no conflict), and a new file where the
         * sandbox adds one. */
        put(fx.host, "mod", "user edit, longer\n");
        put(fx.host, "untouched", "user edit\n");
        put(fx.host, "newdir", "user's file\n");
        before = manifest_of(fx.host);

        ASSERT_ERROR(ws_apply(fx.l, 1, fx.host, m, NULL, 0, &res, &e), EEXIST);
        ASSERT_TRUE(strstr(e.msg, "'mod' changed on the host") != NULL);
        ASSERT_EQ(strv_length(res.conflicts), 2);
        ASSERT_STREQ(res.conflicts[0], "mod");
        ASSERT_STREQ(res.conflicts[1], "newdir");
        ASSERT_EQ(res.n_applied, 0);
        ws_apply_result_done(&res);

        after = manifest_of(fx.host);
        assert_manifests_equal(before, after);
        c = get(fx.host, "mod");
        ASSERT_STREQ(c, "user edit, longer\n");

        /* A manifest is needed without force. */
        ASSERT_ERROR(ws_apply(fx.l, 1, fx.host, NULL, NULL, 0, &res, &e), EINVAL);
        ws_apply_result_done(&res);
        /* A conflict outside the selected paths does not count. */
        ASSERT_OK(
                ws_apply(fx.l, 1, fx.host, m, (const char *const[]){"del", NULL}, false, &res, &e));
        ASSERT_NULL(res.conflicts);
        ASSERT_EQ(res.n_applied, 1);
        ws_apply_result_done(&res);
        ASSERT_FALSE(exists(fx.host, "del"));
}

TEST(apply_force_overwrites) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_free_ char *c = NULL, *d = NULL, *u = NULL;
        WsApplyResult res = {};
        HutchError e = {};

        fx_init(&fx);
        build_changes(&fx);
        m = manifest_of(fx.host);
        put(fx.host, "mod", "user edit, longer\n");
        put(fx.host, "untouched", "user edit\n");
        ASSERT_OK(unlinkat(fx.host, "del", 0));

        if (ws_apply(fx.l, 1, fx.host, m, NULL, WS_APPLY_FORCE, &res, &e) < 0)
                fail_msg("ws_apply: %s", e.msg);
        ASSERT_EQ(strv_length(res.conflicts), 1); /* del is gone already: no change */
        ASSERT_STREQ(res.conflicts[0], "mod");
        ws_apply_result_done(&res);
        c = get(fx.host, "mod");
        ASSERT_STREQ(c, "new content\n");
        u = get(fx.host, "untouched");
        ASSERT_STREQ(u, "user edit\n");
        d = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(d, "");

        /* Force works without a manifest. */
        put(fx.l[0], "later", "later\n");
        ASSERT_OK(ws_apply(fx.l, 1, fx.host, NULL, NULL, WS_APPLY_FORCE, &res, &e));
        ASSERT_NULL(res.conflicts);
        ASSERT_EQ(res.n_applied, 1);
        ws_apply_result_done(&res);
}

TEST(apply_path_prefixes) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_free_ char *d = NULL;
        WsApplyResult res = {};
        HutchError e = {};

        fx_init(&fx);
        build_changes(&fx);
        put(fx.l[0], "newdirx", "not below newdir\n");
        m = manifest_of(fx.host);

        /* Only newdir/deep/f: the directories above it come along, not
         * newdir/l nor newdirx. */
        ASSERT_OK(ws_apply(fx.l, 1, fx.host, m, (const char *const[]){"newdir/deep/f", NULL}, false,
                           &res, &e));
        ASSERT_EQ(res.n_applied, 3);
        ws_apply_result_done(&res);
        ASSERT_TRUE(exists(fx.host, "newdir/deep/f"));
        ASSERT_FALSE(exists(fx.host, "newdir/l"));
        ASSERT_FALSE(exists(fx.host, "newdirx"));

        /* A directory prefix takes what is below it; file-to-dir/x needs
         * file-to-dir replaced. */
        ASSERT_OK(ws_apply(fx.l, 1, fx.host, m,
                           (const char *const[]){"deldir", "file-to-dir/x", NULL}, false, &res,
                           &e));
        ws_apply_result_done(&res);
        ASSERT_FALSE(exists(fx.host, "deldir"));
        ASSERT_TRUE(exists(fx.host, "file-to-dir/x"));
        ASSERT_TRUE(exists(fx.host, "del"));

        d = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(d, "D file del\n"
                        "M symlink link\n"
                        "M file mod\n"
                        "M file mode\n"
                        "A symlink newdir/l\n"
                        "A file newdirx\n"
                        "M dir ro\n"
                        "A file ro/inside\n");

        ASSERT_ERROR(ws_apply(fx.l, 1, fx.host, m, (const char *const[]){"nothing/here", NULL},
                              false, &res, &e),
                     ENOENT);
        ws_apply_result_done(&res);
        ASSERT_ERROR(ws_apply(fx.l, 1, fx.host, m, (const char *const[]){"../host", NULL}, false,
                              &res, &e),
                     EINVAL);
        ws_apply_result_done(&res);
        ASSERT_ERROR(
                ws_apply(fx.l, 1, fx.host, m, (const char *const[]){"/etc", NULL}, false, &res, &e),
                EINVAL);
        ws_apply_result_done(&res);
}

static bool outside_is_empty(const Fx *fx) {
        WsManifest *m = manifest_of(fx->outside);
        size_t n = ws_manifest_size(m);

        ws_manifest_free(m);
        return n == 0;
}

TEST(apply_never_writes_through_symlinks) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_free_ char *d = NULL, *outside = NULL;
        WsApplyResult res = {};
        HutchError e = {};
        struct stat st;

        fx_init(&fx);
        ASSERT_TRUE(asprintf(&outside, "%s/outside", fx.root) > 0);
        mkd(fx.host, "p");
        put(fx.host, "p/f", "p\n");
        m = manifest_of(fx.host);

        /* A lower layer turns x into a symlink out of the folder; the top
         * layer puts a directory x with a file over it. */
        lnk(fx.l[1], "x", outside);
        mkd(fx.l[0], "x");
        put(fx.l[0], "x/passwd", "owned\n");
        /* A symlink to outside is content: applied as a symlink. */
        lnk(fx.l[0], "esc", outside);
        /* The top layer modifies p/f, and the user plants symlinks in the
         * host folder: p becomes a link out, and so does h, where the
         * sandbox makes a directory with a file. */
        put(fx.l[0], "p", "p is a file in the sandbox\n");
        mkd(fx.l[0], "h");
        put(fx.l[0], "h/file", "h\n");
        ASSERT_OK(renameat(fx.host, "p", fx.outside, "p"));
        lnk(fx.host, "p", outside);
        lnk(fx.host, "h", outside);

        d = diff_str(fx.l, 2, fx.host);
        ASSERT_STREQ(d, "A symlink esc\n"
                        "D symlink h\n"
                        "A dir h\n"
                        "A file h/file\n"
                        "D symlink p\n"
                        "A file p\n"
                        "A dir x\n"
                        "A file x/passwd\n");
        ASSERT_ERROR(ws_apply(fx.l, 2, fx.host, m, NULL, false, &res, &e), EEXIST);
        ASSERT_STREQ(res.conflicts[0], "h");
        ws_apply_result_done(&res);

        if (ws_apply(fx.l, 2, fx.host, m, NULL, true, &res, &e) < 0)
                fail_msg("ws_apply: %s", e.msg);
        ws_apply_result_done(&res);
        /* Outside holds only what the user moved there. */
        ASSERT_FALSE(exists(fx.outside, "passwd"));
        ASSERT_FALSE(exists(fx.outside, "file"));
        ASSERT_OK(fstatat(fx.outside, "p", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISDIR(st.st_mode));
        ASSERT_OK(fstatat(fx.host, "h", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISDIR(st.st_mode));
        ASSERT_OK(fstatat(fx.host, "esc", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISLNK(st.st_mode));
        ASSERT_TRUE(exists(fx.host, "x/passwd"));

        /* Paths through a symlink planted after the diff are refused. */
        {
                int dirfd = -EBADF;
                const char *name;

                ASSERT_OK(unlinkat(fx.host, "esc", 0));
                lnk(fx.host, "esc", outside);
                ASSERT_ERROR(ws_open_parent(fx.host, "esc/file", &dirfd, &name), ENOTDIR);
                ASSERT_ERROR(ws_open_parent(fx.host, "esc/p/file", &dirfd, &name), ELOOP);
                ASSERT_ERROR(ws_open_regular(fx.host, "esc/p/f"), ELOOP);
                ASSERT_ERROR(ws_open_parent(fx.host, "x/../../outside/f", &dirfd, &name), EXDEV);
        }
        ASSERT_OK(unlinkat(fx.outside, "p/f", 0));
        ASSERT_OK(unlinkat(fx.outside, "p", AT_REMOVEDIR));
        ASSERT_TRUE(outside_is_empty(&fx));
}

/* ---- layer_copy ---- */

static void assert_same_stat(int a, int b, const char *path) {
        struct stat x, y;

        ASSERT_OK(fstatat(a, path, &x, AT_SYMLINK_NOFOLLOW));
        ASSERT_OK(fstatat(b, path, &y, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(x.st_mode & S_IFMT, y.st_mode & S_IFMT);
        ASSERT_EQ(x.st_uid, y.st_uid);
        ASSERT_EQ(x.st_gid, y.st_gid);
        ASSERT_EQ(x.st_size, y.st_size);
        ASSERT_EQ(x.st_rdev, y.st_rdev);
        ASSERT_EQ(x.st_mtim.tv_sec, y.st_mtim.tv_sec);
        ASSERT_EQ(x.st_mtim.tv_nsec, y.st_mtim.tv_nsec);
        if (!S_ISLNK(x.st_mode))
                ASSERT_EQ(x.st_mode & 01777, y.st_mode & 07777);
}

static void assert_xattr(int dirfd, const char *path, const char *name, const char *value) {
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        char buf[64];
        ssize_t n;

        ASSERT_TRUE(fd >= 0);
        n = fgetxattr(fd, name, buf, sizeof(buf));
        if (!value) {
                ASSERT_TRUE(n < 0 && errno == ENODATA);
                return;
        }
        ASSERT_EQ(n, (ssize_t)strlen(value));
        ASSERT_EQ(memcmp(buf, value, (size_t)n), 0);
}

static void build_layer(int l) {
        put(l, "file", "data\n");
        /* Other owners (and trusted.* xattrs) only root can make. */
        if (geteuid() == 0) {
                ASSERT_OK(fchownat(l, "file", 1234, 5678, 0));
                set_xattr(l, "file", "trusted.hutch-test", "dropped");
        }
        ASSERT_OK(fchmodat(l, "file", 06755, 0));
        set_xattr(l, "file", "user.note", "kept");
        put(l, "hard", "linked\n");
        ASSERT_OK(linkat(l, "hard", l, "hard2", 0));
        mkd(l, "opaque");
        set_xattr(l, "opaque", LAYER_XATTR_OPAQUE, "y");
        set_xattr(l, "opaque", "user.overlay.impure", "y");
        ASSERT_OK(fchmodat(l, "opaque", 01750, 0));
        whiteout(l, "opaque/gone");
        if (geteuid() == 0)
                ASSERT_OK(fchownat(l, "opaque/gone", 1000, 1000, AT_SYMLINK_NOFOLLOW));
        lnk(l, "link", "/etc/passwd");
        if (geteuid() == 0)
                ASSERT_OK(fchownat(l, "link", 42, 43, AT_SYMLINK_NOFOLLOW));
        ASSERT_OK(mkfifoat(l, "fifo", 0620));
        ASSERT_OK(fchmodat(l, "fifo", 0620, 0));
        put_mode(l, "xwh", "", 0644);
        set_xattr(l, "xwh", LAYER_XATTR_WHITEOUT, "");
        special_node(l, "null");
        ASSERT_OK(
                utimensat(l, "link", (struct timespec[2]){{1, 0}, {1000, 5}}, AT_SYMLINK_NOFOLLOW));
        ASSERT_OK(utimensat(l, "file", (struct timespec[2]){{1, 0}, {2000, 6}}, 0));
        ASSERT_OK(utimensat(l, "opaque", (struct timespec[2]){{1, 0}, {3000, 7}}, 0));
        ASSERT_OK(fchmod(l, 0751));
        ASSERT_OK(fsetxattr(l, "user.overlay.origin", "o", 1, 0));
}

TEST(layer_copy_is_exact) {
        _cleanup_fx_ Fx fx = {};
        _cleanup_free_ char *a = NULL, *b = NULL;
        HutchError e = {};
        struct stat x, y;
        char target[64] = {};

        fx_init(&fx);
        build_layer(fx.l[0]);
        if (layer_copy(fx.l[0], fx.l[1], &e) < 0)
                fail_msg("layer_copy: %s", e.msg);

        static const char *const same[] = {"file",        "hard", "hard2", "opaque",
                                           "opaque/gone", "link", "fifo",  "xwh"};
        for (size_t i = 0; i < ELEMENTSOF(same); i++)
                assert_same_stat(fx.l[0], fx.l[1], same[i]);
        ASSERT_OK(fstatat(fx.l[1], "file", &x, 0));
        ASSERT_EQ(x.st_mode & 07777, 0755); /* setuid and setgid dropped */
        ASSERT_OK(fstatat(fx.l[1], "opaque/gone", &x, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISCHR(x.st_mode) && x.st_rdev == makedev(0, 0));
        ASSERT_EQ(readlinkat(fx.l[1], "link", target, sizeof(target) - 1), 11);
        ASSERT_STREQ(target, "/etc/passwd");
        /* Hard links become independent files. */
        ASSERT_OK(fstatat(fx.l[1], "hard", &x, 0));
        ASSERT_OK(fstatat(fx.l[1], "hard2", &y, 0));
        ASSERT_TRUE(x.st_ino != y.st_ino);
        ASSERT_EQ(x.st_nlink, 1);
        ASSERT_FALSE(exists(fx.l[1], "null"));

        assert_xattr(fx.l[1], "file", "user.note", "kept");
        assert_xattr(fx.l[1], "file", "trusted.hutch-test", NULL);
        assert_xattr(fx.l[1], "opaque", LAYER_XATTR_OPAQUE, "y");
        assert_xattr(fx.l[1], "opaque", "user.overlay.impure", "y");
        assert_xattr(fx.l[1], "xwh", LAYER_XATTR_WHITEOUT, "");
        assert_xattr(fx.l[1], ".", "user.overlay.origin", "o");
        ASSERT_OK(fstat(fx.l[1], &x));
        ASSERT_EQ(x.st_mode & 07777, 0751);
        a = get(fx.l[1], "file");
        ASSERT_STREQ(a, "data\n");

        /* The copy means the same to a diff as the original. */
        mkd(fx.host, "opaque");
        put(fx.host, "opaque/gone", "host\n");
        put(fx.host, "xwh", "host\n");
        a = mfree(a);
        a = diff_str(fx.l, 1, fx.host);
        b = diff_str(fx.l + 1, 1, fx.host);
        ASSERT_STREQ(a, b);
        ASSERT_TRUE(strstr(a, "D file opaque/gone\n") != NULL);
        ASSERT_TRUE(strstr(a, "D file xwh\n") != NULL);

        /* The destination must be empty. */
        ASSERT_ERROR(layer_copy(fx.l[0], fx.l[1], &e), EEXIST);
}

TEST(workspace_copy_keeps_its_behaviour) {
        _cleanup_fx_ Fx fx = {};
        HutchError e = {};
        struct stat x;

        fx_init(&fx);
        build_layer(fx.l[0]);
        ASSERT_OK(copy_tree(fx.l[0], fx.l[1], &e));
        /* No whiteouts, devices, xattrs or owners; modes without setuid. */
        ASSERT_FALSE(exists(fx.l[1], "opaque/gone"));
        ASSERT_FALSE(exists(fx.l[1], "null"));
        assert_xattr(fx.l[1], "file", "user.note", NULL);
        assert_xattr(fx.l[1], "opaque", LAYER_XATTR_OPAQUE, NULL);
        ASSERT_OK(fstatat(fx.l[1], "file", &x, 0));
        ASSERT_EQ(x.st_uid, getuid());
        ASSERT_EQ(x.st_mode & 07777, 0755);
        ASSERT_EQ(x.st_mtim.tv_sec, 2000);
        ASSERT_OK(fstatat(fx.l[1], "opaque", &x, 0));
        ASSERT_EQ(x.st_mode & 07777, 01750);
        ASSERT_OK(fstatat(fx.l[1], "fifo", &x, 0));
        ASSERT_TRUE(S_ISFIFO(x.st_mode));
        ASSERT_EQ(x.st_mode & 07777, 0620);
        /* The top directory is left alone. */
        ASSERT_OK(fstat(fx.l[1], &x));
        ASSERT_EQ(x.st_mode & 07777, 0755);
        assert_xattr(fx.l[1], ".", "user.overlay.origin", NULL);
        ASSERT_ERROR(copy_tree(fx.l[0], fx.l[1], &e), EEXIST);
        ASSERT_TRUE(strstr(e.msg, "while copying the workspace") != NULL);
}

/* ---- a real overlayfs ---- */

/* Runs @script with sh in a new user and mount namespace (as
 * `unshare -Urm` does) with the args $1.. = @args. */
static int run_in_userns(const char *script, const char *const *args) {
        const char *argv[16] = {"/usr/bin/unshare", "-Urm", "/bin/sh", "-euc", script, "sh"};
        size_t n = 6;
        int status;
        pid_t pid;

        for (const char *const *a = args; *a && n < ELEMENTSOF(argv) - 1; a++)
                argv[n++] = *a;
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                (void)execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(real_overlay_layers_are_understood) {
        static const char script[] =
                "mount -t overlay overlay -o \"lowerdir=$1,upperdir=$2,workdir=$3,userxattr\" "
                "\"$4\"\n"
                "cd \"$4\"\n"
                "rm a\n"
                "echo changed > b\n"
                "echo new > c\n"
                "rm -r d\n"
                "mkdir d\n"
                "echo z > d/z\n"
                "chmod 700 e\n"
                "cat same > /dev/null\n"
                "touch same\n"
                "mkdir -p f/g\n"
                "ln -s b link\n"
                "echo appended >> e/y\n"
                "rm e/y2\n";
        _cleanup_fx_ Fx fx = {};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_free_ char *lower = NULL, *upper = NULL, *work = NULL, *merged = NULL, *d = NULL,
                            *after = NULL, *y = NULL;
        WsApplyResult res = {};
        HutchError e = {};

        fx_init(&fx);
        put(fx.host, "a", "a\n");
        put(fx.host, "b", "b\n");
        put(fx.host, "same", "same\n");
        mkd(fx.host, "d");
        put(fx.host, "d/x", "x\n");
        mkd(fx.host, "e");
        put(fx.host, "e/y", "y\n");
        put(fx.host, "e/y2", "y2\n");
        mkd(fx.root_fd, "work");
        mkd(fx.root_fd, "merged");
        m = manifest_of(fx.host);
        ASSERT_TRUE(asprintf(&lower, "%s/host", fx.root) > 0);
        ASSERT_TRUE(asprintf(&upper, "%s/l0", fx.root) > 0);
        ASSERT_TRUE(asprintf(&work, "%s/work", fx.root) > 0);
        ASSERT_TRUE(asprintf(&merged, "%s/merged", fx.root) > 0);

        ASSERT_EQ(run_in_userns(script, (const char *const[]){lower, upper, work, merged, NULL}),
                  0);
        d = diff_str(fx.l, 1, fx.host);
        /* "same" was copied up by touch, unchanged. */
        ASSERT_STREQ(d, "D file a\n"
                        "M file b\n"
                        "A file c\n"
                        "D file d/x\n"
                        "A file d/z\n"
                        "M dir e\n"
                        "M file e/y\n"
                        "D file e/y2\n"
                        "A dir f\n"
                        "A dir f/g\n"
                        "A symlink link\n");

        if (ws_apply(fx.l, 1, fx.host, m, NULL, 0, &res, &e) < 0)
                fail_msg("ws_apply: %s", e.msg);
        ws_apply_result_done(&res);
        after = diff_str(fx.l, 1, fx.host);
        ASSERT_STREQ(after, "");
        y = get(fx.host, "e/y");
        ASSERT_STREQ(y, "y\nappended\n");
}

DEFINE_TEST_MAIN
