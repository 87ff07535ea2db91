/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "fd-util.h"
#include "image/image-layer.h"
#include "image/image-oci.h"
#include "image/image-store.h"
#include "store/archive.h"
#include "strv.h"
#include "test.h"

#define D64 "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* ---- references ---- */

TEST(image_ref_is_valid) {
        static const char *const good[] = {
                "busybox",
                "busybox:1.36",
                "me/box",
                "localhost:5000/x/y:2",
                "registry.example.com/a/b_c-d.e:v1.0",
                "0123456789ab",
                D64,
                "busybox@" D64,
                "a:b",
        };
        static const char *const bad[] = {
                "",
                "UPPER",
                "a b",
                "a//b",
                "/a",
                "a/",
                "-a",
                "a:",
                "a:-x",
                "a:b:c",
                "sha256:abc",
                "busybox@sha256:xyz",
                "a:"
                "tttttttttttttttttttt"
                "tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt"
                "ttttttttttttttttttttttttttttttttttttttt",
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (!image_ref_is_valid(good[i]))
                        fail_msg("'%s' should be valid", good[i]);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (image_ref_is_valid(bad[i]))
                        fail_msg("'%s' should be invalid", bad[i]);
        }
}

TEST(image_ref_normalize) {
        static const struct {
                const char *in, *out;
        } table[] = {
                {"busybox", "docker.io/library/busybox:latest"},
                {"busybox:1", "docker.io/library/busybox:1"},
                {"me/box", "docker.io/me/box:latest"},
                {"docker.io/busybox", "docker.io/library/busybox:latest"},
                {"index.docker.io/me/box:2", "docker.io/me/box:2"},
                {"localhost/x", "localhost/x:latest"},
                {"localhost:5000/x/y:2", "localhost:5000/x/y:2"},
                {"quay.example.com/a/b", "quay.example.com/a/b:latest"},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *s = NULL;

                ASSERT_OK(image_ref_normalize(table[i].in, &s));
                ASSERT_STREQ(s, table[i].out);
        }
        {
                char *s = NULL;

                ASSERT_ERROR(image_ref_normalize(D64, &s), EINVAL);
                ASSERT_ERROR(image_ref_normalize("Bad", &s), EINVAL);
                ASSERT_ERROR(image_ref_normalize(NULL, &s), EINVAL);
                ASSERT_NULL(s);
        }
        ASSERT_STREQ(image_ref_familiar("docker.io/library/busybox:latest"), "busybox:latest");
        ASSERT_STREQ(image_ref_familiar("docker.io/me/box:1"), "me/box:1");
        ASSERT_STREQ(image_ref_familiar("localhost:5000/x:1"), "localhost:5000/x:1");
}

TEST(oci_compression) {
        for (int i = 0; i < _OCI_COMPRESSION_MAX; i++)
                ASSERT_EQ(oci_compression_from_string(oci_compression_to_string(i)), i);
        ASSERT_EQ(oci_compression_from_string("lz4"), _OCI_COMPRESSION_INVALID);
        ASSERT_NULL(oci_compression_to_string(_OCI_COMPRESSION_MAX));
        ASSERT_EQ(oci_layer_media_type_compression("application/vnd.oci.image.layer.v1.tar+zstd"),
                  OCI_COMPRESSION_ZSTD);
        ASSERT_EQ(oci_layer_media_type_compression(
                          "application/vnd.docker.image.rootfs.diff.tar.gzip"),
                  OCI_COMPRESSION_GZIP);
        ASSERT_ERROR(oci_layer_media_type_compression("application/x-foo"), EPROTONOSUPPORT);
        ASSERT_ERROR(oci_layer_media_type_compression(NULL), EPROTONOSUPPORT);
        ASSERT_EQ(oci_media_type_kind(OCI_MT_MANIFEST), 1);
        ASSERT_EQ(oci_media_type_kind(DOCKER_MT_LIST), 2);
        ASSERT_ERROR(oci_media_type_kind("text/plain"), EPROTONOSUPPORT);
}

/* ---- the JSON parsers ---- */

#define DESC(mt) "{\"mediaType\": \"" mt "\", \"digest\": \"" D64 "\", \"size\": 3}"

static int parse_manifest(const char *text) {
        OciManifest m = {};
        HutchError err = {};
        int r = oci_manifest_parse(text, strlen(text), &m, &err);

        if (r < 0 && (err.errnum != -r || !err.msg[0]))
                fail_msg("'%s': error %d without its message", text, r);
        oci_manifest_done(&m);
        return r;
}

TEST(oci_manifest_parse) {
        OciManifest m = {};
        const char *ok = "{\"schemaVersion\": 2, \"mediaType\": \"" OCI_MT_MANIFEST "\","
                         "\"config\": " DESC(OCI_MT_CONFIG) ", \"layers\": [" DESC(
                                 "application/vnd.oci.image.layer.v1.tar+gzip") "],"
                                                                                "\"extension\": 1}";

        ASSERT_OK(oci_manifest_parse(ok, strlen(ok), &m, NULL));
        ASSERT_EQ(m.n_layers, 1);
        ASSERT_STREQ(m.config.digest, D64);
        ASSERT_EQ(m.layers[0].size, 3);
        oci_manifest_done(&m);

        ASSERT_ERROR(parse_manifest("{nope"), EINVAL);
        ASSERT_ERROR(parse_manifest("[]"), EINVAL);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 1}"), EPROTONOSUPPORT);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2}"), EINVAL);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2, \"mediaType\": \"x/y\"}"),
                     EPROTONOSUPPORT);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2, \"config\": " DESC(
                             "application/vnd.example.artifact") ", \"layers\": []}"),
                     EPROTONOSUPPORT);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2, \"config\": " DESC(
                             OCI_MT_CONFIG) ", \"layers\": [" DESC("application/x-foo") "]}"),
                     EPROTONOSUPPORT);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2, \"config\": {\"digest\": "
                                    "\"sha512:00\", \"size\": 1}, \"layers\": []}"),
                     EPROTONOSUPPORT);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2, \"config\": {\"digest\": "
                                    "\"sha256:00\", \"size\": 1}, \"layers\": []}"),
                     EINVAL);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2, \"config\": {\"digest\": \"" D64
                                    "\", \"size\": -1}, \"layers\": []}"),
                     EINVAL);
        ASSERT_ERROR(parse_manifest("{\"schemaVersion\": 2, \"config\": " DESC(
                             OCI_MT_CONFIG) ", \"layers\": {}}"),
                     EINVAL);
        ASSERT_ERROR(parse_manifest("{\"a\": 1, \"a\": 2}"), EINVAL);
}

TEST(oci_index_parse_and_pick) {
        OciIndex ix = {};
        HutchError err = {};
        const char *multi =
                "{\"schemaVersion\": 2, \"manifests\": ["
                "{\"mediaType\": \"" OCI_MT_MANIFEST "\", \"digest\": \"" D64 "\", \"size\": 1,"
                " \"platform\": {\"os\": \"linux\", \"architecture\": \"arm64\"}},"
                "{\"mediaType\": \"" OCI_MT_MANIFEST "\", \"digest\": \"" D64 "\", \"size\": 2,"
                " \"platform\": {\"os\": \"linux\", \"architecture\": \"amd64\"},"
                " \"annotations\": {\"io.containerd.image.name\": \"x:1\"}}]}";
        const char *arm = "{\"schemaVersion\": 2, \"manifests\": [{\"digest\": \"" D64
                          "\", \"size\": 1, \"platform\": {\"os\": \"linux\", "
                          "\"architecture\": \"arm64\"}}]}";

        ASSERT_OK(oci_index_parse(multi, strlen(multi), &ix, NULL));
        ASSERT_EQ(ix.n_manifests, 2);
        ASSERT_EQ(oci_index_pick(&ix, NULL), 1);
        ASSERT_STREQ(ix.manifests[1].image_name, "x:1");
        oci_index_done(&ix);

        ASSERT_OK(oci_index_parse(arm, strlen(arm), &ix, NULL));
        ASSERT_ERROR(oci_index_pick(&ix, &err), ENXIO);
        ASSERT_TRUE(strstr(err.msg, "linux/arm64") != NULL);
        oci_index_done(&ix);

        ASSERT_ERROR(oci_index_parse("{\"schemaVersion\": 2}", 20, &ix, NULL), EINVAL);
        ASSERT_ERROR(oci_index_parse("{\"schemaVersion\": 2, \"manifests\": [{\"digest\": \"" D64
                                     "\", \"size\": 1, \"platform\": 3}]}",
                                     strlen("{\"schemaVersion\": 2, \"manifests\": [{\"digest\": "
                                            "\"" D64 "\", \"size\": 1, \"platform\": 3}]}"),
                                     &ix, NULL),
                     EINVAL);
        {
                OciIndex empty = {};

                ASSERT_ERROR(oci_index_pick(&empty, NULL), ENXIO);
        }
}

TEST(oci_config_parse) {
        OciConfig c = {};
        const char *ok = "{\"architecture\": \"amd64\", \"os\": \"linux\", \"config\": {"
                         "\"Env\": [\"A=1\"], \"WorkingDir\": \"/w\", \"User\": \"1:2\","
                         "\"Entrypoint\": null, \"Cmd\": []},"
                         "\"rootfs\": {\"type\": \"layers\", \"diff_ids\": [\"" D64 "\"]}}";
        static const char *const bad[] = {
                "{\"rootfs\": {\"type\": \"layers\"}}",
                "{\"rootfs\": {\"type\": \"other\", \"diff_ids\": []}}",
                "{\"config\": {\"Env\": [\"NOEQUALS\"]}, \"rootfs\": {\"type\": \"layers\", "
                "\"diff_ids\": []}}",
                "{\"config\": {\"Cmd\": \"sh\"}, \"rootfs\": {\"type\": \"layers\", "
                "\"diff_ids\": []}}",
                "{\"config\": {\"User\": 0}, \"rootfs\": {\"type\": \"layers\", "
                "\"diff_ids\": []}}",
                "{\"config\": 1, \"rootfs\": {\"type\": \"layers\", \"diff_ids\": []}}",
        };

        ASSERT_OK(oci_config_parse(ok, strlen(ok), &c, NULL));
        ASSERT_STREQ(c.config.env[0], "A=1");
        ASSERT_STREQ(c.config.working_dir, "/w");
        ASSERT_STREQ(c.config.user, "1:2");
        ASSERT_NULL(c.config.entrypoint);
        ASSERT_NOT_NULL(c.config.cmd); /* [] is not absent */
        ASSERT_EQ(strv_length(c.config.cmd), 0);
        ASSERT_EQ(strv_length(c.diff_ids), 1);
        oci_config_done(&c);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERROR(oci_config_parse(bad[i], strlen(bad[i]), &c, NULL), EINVAL);
        ASSERT_ERROR(oci_config_parse("{\"rootfs\": {\"type\": \"layers\", \"diff_ids\": "
                                      "[\"md5:00\"]}}",
                                      strlen("{\"rootfs\": {\"type\": \"layers\", \"diff_ids\": "
                                             "[\"md5:00\"]}}"),
                                      &c, NULL),
                     EPROTONOSUPPORT);
        {
                size_t n = IMAGE_JSON_MAX + 1;
                char *big = malloc(n);

                ASSERT_NOT_NULL(big);
                memset(big, ' ', n);
                ASSERT_ERROR(oci_config_parse(big, n, &c, NULL), E2BIG);
                free(big);
        }
}

TEST(docker_save_parse) {
        DockerSave d = {};
        const char *ok = "[{\"Config\": \"c.json\", \"RepoTags\": [\"a:1\"], \"Layers\": "
                         "[\"l/layer.tar\"]}]";

        ASSERT_OK(docker_save_parse(ok, strlen(ok), &d, NULL));
        ASSERT_EQ(d.n_images, 1);
        ASSERT_STREQ(d.images[0].layers[0], "l/layer.tar");
        docker_save_done(&d);
        ASSERT_ERROR(docker_save_parse("[]", 2, &d, NULL), EINVAL);
        ASSERT_ERROR(docker_save_parse("{}", 2, &d, NULL), EINVAL);
        ASSERT_ERROR(docker_save_parse("[{\"Config\": \"c\"}]", 18, &d, NULL), EINVAL);
}

/* ---- the layer reader ---- */

typedef struct Entry {
        char type; /* d f l h c b */
        const char *path;
        const char *arg; /* data, or link target */
} Entry;

/* A tar of @entries in a new memfd (offset 0); @gzip compresses it. */
static int tar_of(const Entry *entries, size_t n, bool gzip) {
        struct archive *a = archive_write_new();
        int fd = memfd_create("layer", MFD_CLOEXEC);

        if (!a || fd < 0)
                fail_msg("archive_write_new");
        if ((gzip && archive_write_add_filter_gzip(a) != ARCHIVE_OK) ||
            archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_open_fd(a, fd) != ARCHIVE_OK)
                fail_msg("archive open: %s", archive_error_string(a));
        for (size_t i = 0; i < n; i++) {
                struct archive_entry *e = archive_entry_new();
                size_t len = entries[i].arg ? strlen(entries[i].arg) : 0;

                archive_entry_set_pathname(e, entries[i].path);
                archive_entry_set_mtime(e, 1700000000, 0);
                archive_entry_set_perm(e, 0755);
                switch (entries[i].type) {
                case 'd':
                        archive_entry_set_filetype(e, AE_IFDIR);
                        break;
                case 'f':
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_size(e, (la_int64_t)len);
                        break;
                case 'l':
                        archive_entry_set_filetype(e, AE_IFLNK);
                        archive_entry_set_symlink(e, entries[i].arg);
                        break;
                case 'h':
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_hardlink(e, entries[i].arg);
                        break;
                case 'c':
                case 'b':
                        archive_entry_set_filetype(e, entries[i].type == 'c' ? AE_IFCHR : AE_IFBLK);
                        archive_entry_set_rdev(e, makedev(1, 3));
                        break;
                default:
                        fail_msg("bad entry type");
                }
                if (archive_write_header(a, e) != ARCHIVE_OK)
                        fail_msg("header: %s", archive_error_string(a));
                if (entries[i].type == 'f' && len &&
                    archive_write_data(a, entries[i].arg, len) != (la_ssize_t)len)
                        fail_msg("data");
                archive_entry_free(e);
        }
        if (archive_write_close(a) != ARCHIVE_OK)
                fail_msg("close");
        archive_write_free(a);
        if (lseek(fd, 0, SEEK_SET) < 0)
                fail_msg("lseek");
        return fd;
}

typedef struct LayerFx {
        char dir[64];
        int parent, root;
} LayerFx;

static void layer_fx_open(LayerFx *fx) {
        strcpy(fx->dir, "/tmp/test-image-XXXXXX");
        if (!mkdtemp(fx->dir))
                fail_msg("mkdtemp");
        fx->parent = open(fx->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fx->parent < 0 || mkdirat(fx->parent, "root", 0700) < 0)
                fail_msg("mkdir");
        fx->root = openat(fx->parent, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fx->root < 0)
                fail_msg("open root");
}

static void layer_fx_close(LayerFx *fx) {
        ASSERT_OK(snapshot_archive_clear(fx->parent));
        (void)close(fx->root);
        (void)close(fx->parent);
        (void)rmdir(fx->dir);
}

static int unpack(const Entry *entries, size_t n, bool gzip, ImageLayerResult *res, HutchError *err,
                  LayerFx *fx) {
        int fd = tar_of(entries, n, gzip);
        int r = image_layer_unpack(fd, fx->root, IMAGE_LAYER_OWNERS_CALLER, -EBADF, res, err);

        (void)close(fd);
        return r;
}

TEST(image_layer_unpack_overlay_semantics) {
        static const Entry e[] = {
                {'d', "./", NULL},
                {'d', "./a/", NULL},
                {'f', "./a/file", "data"},
                {'f', "./a/.wh.gone", ""},
                {'f', "./a/.wh..wh..opq", ""},
                {'h', "./a/link", "./a/file"},
                {'l', "./a/sym", "/etc/passwd"},
                {'f', "implicit/parent/x", "x"},
                {'c', "dev/null", NULL},
                {'b', "dev/sda", NULL},
                {'f', "./a/file", "again"}, /* a later entry replaces an earlier one */
        };
        ImageLayerResult res;
        LayerFx fx;
        struct stat st, st2;
        char buf[16] = "";
        int fd;

        layer_fx_open(&fx);
        ASSERT_OK(unpack(e, ELEMENTSOF(e), true, &res, NULL, &fx));
        ASSERT_EQ(res.compression, OCI_COMPRESSION_GZIP);
        ASSERT_EQ(res.skipped_devices, 2);
        ASSERT_TRUE(strncmp(res.diff_id, "sha256:", 7) == 0);
        ASSERT_TRUE(strcmp(res.diff_id, res.blob_digest) != 0);
        ASSERT_OK(fstatat(fx.root, "a/gone", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == 0);
        ASSERT_EQ(fgetxattr(fx.root, "user.overlay.opaque", buf, sizeof(buf)) < 0, true);
        fd = openat(fx.root, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_EQ(fgetxattr(fd, "user.overlay.opaque", buf, sizeof(buf)), 1);
        (void)close(fd);
        ASSERT_EQ(readlinkat(fx.root, "a/sym", buf, sizeof(buf)), 11);
        ASSERT_OK(fstatat(fx.root, "a/link", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_OK(fstatat(fx.root, "implicit/parent/x", &st2, AT_SYMLINK_NOFOLLOW));
        ASSERT_ERROR(fstatat(fx.root, "dev/null", &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0,
                     ENOENT);
        ASSERT_ERROR(fstatat(fx.root, "dev/sda", &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0,
                     ENOENT);
        ASSERT_ERROR(fstatat(fx.root, "a/.wh.gone", &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0,
                     ENOENT);
        layer_fx_close(&fx);
}

TEST(image_layer_unpack_refuses_escapes) {
        static const struct {
                Entry e[2];
                size_t n;
                int err;
        } bad[] = {
                {{{'f', "../x", "x"}}, 1, EPERM},
                {{{'f', "/x", "x"}}, 1, EPERM},
                {{{'h', "x", "../../etc/passwd"}}, 1, EPERM},
                {{{'h', "x", "/etc/passwd"}}, 1, EPERM},
                {{{'h', "x", "etc/passwd"}}, 1, EPERM},
                {{{'l', "evil", "/tmp"}, {'f', "evil/x", "x"}}, 2, EPERM},
                {{{'l', "evil", ".."}, {'f', "evil/x", "x"}}, 2, EPERM},
                {{{'f', "a/.wh.", ""}}, 1, EINVAL},
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ImageLayerResult res;
                HutchError err = {};
                LayerFx fx;
                struct stat st;

                layer_fx_open(&fx);
                ASSERT_ERROR(unpack(bad[i].e, bad[i].n, false, &res, &err, &fx), bad[i].err);
                ASSERT_EQ(err.errnum, bad[i].err);
                ASSERT_TRUE(err.msg[0] != '\0');
                /* Nothing beside the layer's root. */
                ASSERT_ERROR(fstatat(fx.parent, "x", &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0,
                             ENOENT);
                layer_fx_close(&fx);
        }
}

TEST(image_layer_unpack_corrupt) {
        static const Entry e[] = {{'f', "file", "0123456789012345678901234567890123456789"}};
        int fd = tar_of(e, 1, true), trunc;
        _cleanup_free_ char *data = NULL;
        ImageLayerResult res;
        HutchError err = {};
        size_t len;
        LayerFx fx;

        ASSERT_OK(read_full_fd(fd, 1 << 20, &data, &len));
        (void)close(fd);
        trunc = memfd_create("trunc", MFD_CLOEXEC);
        ASSERT_OK(loop_write(trunc, data, len / 2));
        ASSERT_OK(lseek(trunc, 0, SEEK_SET));
        layer_fx_open(&fx);
        ASSERT_ERROR(
                image_layer_unpack(trunc, fx.root, IMAGE_LAYER_OWNERS_CALLER, -EBADF, &res, &err),
                EBADMSG);
        (void)close(trunc);
        layer_fx_close(&fx);

        trunc = memfd_create("empty", MFD_CLOEXEC);
        layer_fx_open(&fx);
        ASSERT_ERROR(
                image_layer_unpack(trunc, fx.root, IMAGE_LAYER_OWNERS_CALLER, -EBADF, &res, &err),
                EBADMSG);
        ASSERT_ERROR(
                image_layer_unpack(-EBADF, fx.root, IMAGE_LAYER_OWNERS_CALLER, -EBADF, &res, &err),
                EINVAL);
        (void)close(trunc);
        layer_fx_close(&fx);
}

DEFINE_TEST_MAIN
