/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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
#include "rm-rf.h"
#include "sha256.h"
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

/* No registries.conf of the machine's: this process reads an empty one,
 * and the tests that want a default registry set $HUTCH_REGISTRY_DEFAULT. */
__attribute__((constructor)) static void conf_setup(void) {
        (void)setenv("CONTAINERS_REGISTRIES_CONF", "/dev/null", 1);
        (void)unsetenv("HUTCH_REGISTRY_DEFAULT");
}

/* An image runs where its config's platform is the host's, or unsaid. */
TEST(image_check_platform) {
        char host[65], sparc[] = "sparc64", linux_os[] = "linux", win[] = "windows", empty[] = "";
        Image im = {};
        HutchError e = {};

        ASSERT_OK(image_host_architecture(host, sizeof(host)));
        ASSERT_TRUE(host[0] != '\0');
        ASSERT_ERROR(image_host_architecture(host, 1), ENAMETOOLONG);
        ASSERT_OK(image_host_architecture(host, sizeof(host)));
        ASSERT_OK(image_check_platform(&im, "none", &e));
        im.config.architecture = host;
        im.config.os = linux_os;
        ASSERT_OK(image_check_platform(&im, "native", &e));
        im.config.architecture = empty;
        ASSERT_OK(image_check_platform(&im, "unsaid", &e));
        im.config.architecture = sparc;
        ASSERT_ERROR(image_check_platform(&im, "sp", &e), ENOEXEC);
        ASSERT_TRUE(strstr(e.msg, "'sp' is for linux/sparc64") != NULL);
        ASSERT_TRUE(strstr(e.msg, host) != NULL);
        im.config.architecture = host;
        im.config.os = win;
        ASSERT_ERROR(image_check_platform(&im, "w", &e), ENOEXEC);
        ASSERT_TRUE(strstr(e.msg, "windows/") != NULL);
}

TEST(image_ref_normalize) {
        static const struct {
                const char *in, *out;
        } with_default[] =
                {
                        {"busybox", "registry.example.test/library/busybox:latest"},
                        {"busybox:1", "registry.example.test/library/busybox:1"},
                        {"me/box", "registry.example.test/me/box:latest"},
                        {"registry.example.test/busybox",
                         "registry.example.test/library/busybox:latest"},
                        {"registry.example.test/me/box:2", "registry.example.test/me/box:2"},
                        {"localhost/x", "localhost/x:latest"},
                        {"localhost:5000/x/y:2", "localhost:5000/x/y:2"},
                        {"other.example.test/a", "other.example.test/a:latest"},
                },
          without[] = {
                  {"busybox", "busybox:latest"},
                  {"me/box:1", "me/box:1"},
                  {"localhost:5000/x/y:2", "localhost:5000/x/y:2"},
                  {"other.example.test/a", "other.example.test/a:latest"},
          };

        ASSERT_OK(setenv("HUTCH_REGISTRY_DEFAULT", "registry.example.test", 1));
        for (size_t i = 0; i < ELEMENTSOF(with_default); i++) {
                _cleanup_free_ char *s = NULL;

                ASSERT_OK(image_ref_normalize(with_default[i].in, &s));
                ASSERT_STREQ(s, with_default[i].out);
        }
        {
                char *s = NULL;

                ASSERT_ERROR(image_ref_normalize(D64, &s), EINVAL);
                ASSERT_ERROR(image_ref_normalize("Bad", &s), EINVAL);
                ASSERT_ERROR(image_ref_normalize(NULL, &s), EINVAL);
                ASSERT_NULL(s);
        }
        ASSERT_STREQ(image_ref_familiar("registry.example.test/library/busybox:latest"),
                     "busybox:latest");
        ASSERT_STREQ(image_ref_familiar("registry.example.test/me/box:1"), "me/box:1");
        ASSERT_STREQ(image_ref_familiar("localhost:5000/x:1"), "localhost:5000/x:1");
        ASSERT_OK(unsetenv("HUTCH_REGISTRY_DEFAULT"));
        for (size_t i = 0; i < ELEMENTSOF(without); i++) {
                _cleanup_free_ char *s = NULL;

                ASSERT_OK(image_ref_normalize(without[i].in, &s));
                ASSERT_STREQ(s, without[i].out);
        }
        ASSERT_STREQ(image_ref_familiar("registry.example.test/library/busybox:latest"),
                     "registry.example.test/library/busybox:latest");
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

/* ---- the store ---- */

static void hex_of(const void *data, size_t len, char out[static IMAGE_DIGEST_LEN + 1]) {
        unsigned char d[SHA256_DIGEST_SIZE];
        Sha256 sha;

        sha256_init(&sha);
        sha256_update(&sha, data, len);
        sha256_finish(&sha, d);
        memcpy(out, "sha256:", 7);
        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                (void)snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

static void blob_write(int dirfd, const void *data, size_t len, char digest[IMAGE_DIGEST_LEN + 1]) {
        char path[128];
        int fd;

        hex_of(data, len, digest);
        (void)snprintf(path, sizeof(path), "blobs/sha256/%s", digest + 7);
        fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || loop_write(fd, data, len) < 0)
                fail_msg("write %s", path);
        (void)close(fd);
}

/* An OCI layout of one uncompressed layer at @dirfd. */
static void layout_write(int dirfd) {
        static const Entry e[] = {{'f', "hello", "hi"}};
        char layer_d[IMAGE_DIGEST_LEN + 1], config_d[IMAGE_DIGEST_LEN + 1],
                manifest_d[IMAGE_DIGEST_LEN + 1];
        _cleanup_free_ char *layer = NULL, *config = NULL, *manifest = NULL, *index = NULL;
        size_t layer_len;
        int fd = tar_of(e, 1, false);

        ASSERT_OK(read_full_fd(fd, 1 << 20, &layer, &layer_len));
        (void)close(fd);
        if (mkdirat(dirfd, "blobs", 0755) < 0 || mkdirat(dirfd, "blobs/sha256", 0755) < 0)
                fail_msg("mkdir blobs");
        blob_write(dirfd, layer, layer_len, layer_d);
        ASSERT_TRUE(asprintf(&config,
                             "{\"architecture\": \"amd64\", \"os\": \"linux\", \"config\": "
                             "{\"Cmd\": [\"/hello\"]}, \"rootfs\": {\"type\": \"layers\", "
                             "\"diff_ids\": [\"%s\"]}}",
                             layer_d) > 0);
        blob_write(dirfd, config, strlen(config), config_d);
        ASSERT_TRUE(asprintf(&manifest,
                             "{\"schemaVersion\": 2, \"mediaType\": \"" OCI_MT_MANIFEST "\", "
                             "\"config\": {\"mediaType\": \"" OCI_MT_CONFIG
                             "\", \"digest\": \"%s\", \"size\": %zu}, \"layers\": "
                             "[{\"mediaType\": \"application/vnd.oci.image.layer.v1.tar\", "
                             "\"digest\": \"%s\", \"size\": %zu}]}",
                             config_d, strlen(config), layer_d, layer_len) > 0);
        blob_write(dirfd, manifest, strlen(manifest), manifest_d);
        ASSERT_TRUE(asprintf(&index,
                             "{\"schemaVersion\": 2, \"manifests\": [{\"mediaType\": "
                             "\"" OCI_MT_MANIFEST "\", \"digest\": \"%s\", \"size\": %zu}]}",
                             manifest_d, strlen(manifest)) > 0);
        fd = openat(dirfd, "index.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_OK(loop_write(fd, index, strlen(index)));
        (void)close(fd);
}

TEST(image_store_use_rm_gc) {
        char dir[] = "/tmp/test-image-store-XXXXXX";
        _cleanup_free_ char *home = NULL, *src = NULL, *holder = NULL, *sandbox = NULL;
        _cleanup_(image_store_freep) ImageStore *s = NULL;
        _cleanup_(image_freep) Image *im = NULL, *again = NULL;
        HutchError err = {};
        unsigned n = 99;
        bool gone = false;
        int srcfd;

        ASSERT_NOT_NULL(mkdtemp(dir));
        ASSERT_TRUE(asprintf(&home, "%s/home", dir) > 0);
        ASSERT_TRUE(asprintf(&src, "%s/src", dir) > 0);
        ASSERT_TRUE(asprintf(&sandbox, "%s/home/sandboxes/box1", dir) > 0);
        ASSERT_OK(mkdir(home, 0700));
        ASSERT_OK(mkdir(src, 0755));
        srcfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        layout_write(srcfd);
        (void)close(srcfd);
        {
                Store st = {.home = home};

                ASSERT_OK(image_store_open(&st, &s, &err));
                ASSERT_ERROR(image_store_open(NULL, &s, &err), EINVAL);
        }
        ASSERT_OK(image_store_import(s, src, "t:1", -EBADF, &im, &err));
        ASSERT_EQ(im->n_layers, 1);
        ASSERT_STREQ(im->names[0], "t:1");
        ASSERT_STREQ(im->config.cmd[0], "/hello");
        ASSERT_ERROR(image_store_import(s, src, "Bad:Name", -EBADF, NULL, &err), EINVAL);
        ASSERT_OK(image_store_resolve(s, "t:1", &again, &err));
        ASSERT_STREQ(again->digest, im->digest);
        ASSERT_ERROR(image_store_resolve(s, "t:2", &again, &err), ENOENT);
        ASSERT_ERROR(image_store_resolve(s, "Not Valid", &again, &err), EINVAL);

        ASSERT_ERROR(image_store_use(s, D64, "sandbox", "box1", &err), ENOENT);
        ASSERT_ERROR(image_store_use(s, im->digest, "container", "box1", &err), EINVAL);
        ASSERT_ERROR(image_store_use(s, im->digest, "sandbox", "../x", &err), EINVAL);
        ASSERT_ERROR(image_store_use(s, "sha256:1", "sandbox", "box1", &err), EINVAL);
        ASSERT_OK(image_store_use(s, im->digest, "sandbox", "box1", &err));
        ASSERT_OK(image_store_use(s, im->digest, "sandbox", "box1", &err)); /* idempotent */
        /* box1 does not exist in the store: a stale mark. */
        ASSERT_OK(image_store_holder(s, im->digest, &holder));
        ASSERT_NULL(holder);
        *strrchr(sandbox, '/') = '\0';
        ASSERT_OK(mkdir(sandbox, 0700));
        sandbox[strlen(sandbox)] = '/';
        ASSERT_OK(mkdir(sandbox, 0700));
        ASSERT_OK(image_store_holder(s, im->digest, &holder));
        ASSERT_STREQ(holder, "sandbox box1");
        ASSERT_ERROR(image_store_remove(s, "t:1", &gone, &err), EBUSY);
        ASSERT_TRUE(strstr(err.msg, "sandbox box1") != NULL);
        ASSERT_OK(image_store_unuse(s, im->digest, "sandbox", "box1", &err));
        ASSERT_OK(image_store_unuse(s, im->digest, "sandbox", "box1", &err)); /* none: fine */
        ASSERT_OK(image_store_remove(s, "t:1", &gone, &err));
        ASSERT_TRUE(gone);
        ASSERT_ERROR(image_store_remove(s, "t:1", &gone, &err), ENOENT);
        ASSERT_EQ(image_store_gc(s, &n, &err), 0);
        ASSERT_EQ(n, 0);
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
}

DEFINE_TEST_MAIN
