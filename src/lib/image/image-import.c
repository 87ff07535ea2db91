/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>

#include "fd-util.h"
#include "image/image-internal.h"
#include "image/image-layer.h"
#include "image/image-oci.h"
#include "image/registries-conf.h"
#include "rm-rf.h"
#include "sha256.h"
#include "store/archive.h"
#include "strv.h"
#include "time-util.h"

/* image_store_import() (image-store.h). Every source becomes a directory
 * first: an OCI layout directory is read where it is; a tar is unpacked
 * (its regular files and symlinks only, checked like a layer's entries)
 * into the import's temporary folder; a plain root filesystem tar is a
 * single layer. Then the manifest is found and checked, each layer is
 * unpacked and checked (or found in the store already), and the image's
 * record is committed by rename. */

#define INDEX_DEPTH_MAX 4
#define SOURCE_FILES_MAX 65536
#define IO_BUF (128u * 1024)

static inline void archive_read_freep(struct archive **a) {
        if (*a)
                (void)archive_read_free(*a);
        *a = NULL;
}

typedef struct Import {
        ImageStore *s;
        char *tmp;   /* the import's .tmp-* folder (name in the store) */
        int tmp_fd;  /* of it */
        int hold_fd; /* the flock that keeps gc away */
        int src_fd;  /* the layout directory */
        const char *format;
        char **pending; /* pairs: a layer-<i> folder of tmp, its diff id's hex */
        ImageLayerOwners owners;
        HutchError *reterr;
} Import;

static void import_done(Import *im) {
        if (im->tmp) {
                (void)rm_rf_at(im->s->dirfd, im->tmp);
                free(im->tmp);
        }
        (void)safe_close(im->tmp_fd);
        (void)safe_close(im->hold_fd);
        (void)safe_close(im->src_fd);
        strv_free(im->pending);
}

/* Moves the unpacked layers into layers/ (each whole, by rename). */
static int layers_commit(Import *im) {
        for (size_t i = 0; im->pending && im->pending[i] && im->pending[i + 1]; i += 2) {
                char dest[128];

                (void)snprintf(dest, sizeof(dest), "layers/%s", im->pending[i + 1]);
                if (renameat(im->tmp_fd, im->pending[i], im->s->dirfd, dest) >= 0)
                        continue;
                /* Another import put the same layer there meanwhile. */
                if ((errno != EEXIST && errno != ENOTEMPTY) ||
                    !image_store_has_layer(im->s, im->pending[i + 1]))
                        return hutch_error_set(im->reterr, errno, "cannot store layer %s: %m",
                                               im->pending[i + 1]);
        }
        (void)fsync(im->s->dirfd);
        return 0;
}

static void digest_hex(const void *data, size_t len, char out[static IMAGE_DIGEST_LEN + 1]) {
        unsigned char d[SHA256_DIGEST_SIZE];
        Sha256 sha;

        sha256_init(&sha);
        sha256_update(&sha, data, len);
        sha256_finish(&sha, d);
        memcpy(out, IMAGE_DIGEST_PREFIX, 7);
        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                (void)snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

/* Opens @path below the source directory: no escape, symlinks of the
 * source followed only while they stay beneath it (an old `docker save`
 * links layers of the same content). A regular file only. */
static int source_open(Import *im, const char *path) {
        struct open_how how = {
                .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        struct stat st;
        int fd;

        fd = (int)syscall(SYS_openat2, im->src_fd, path, &how, sizeof(how));
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                (void)close(fd);
                return -EBADF;
        }
        return fd;
}

static int blob_path(const char *digest, char *buf, size_t size) {
        int n = snprintf(buf, size, "blobs/sha256/%s", digest + 7);

        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Reads a small file of the source whole: at most IMAGE_JSON_MAX bytes. */
static int source_read(Import *im, const char *path, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = source_open(im, path);
        int r;

        if (fd < 0)
                return hutch_error_set(im->reterr, fd == -EBADF ? EINVAL : -fd,
                                       "cannot read '%.200s' of the image: %s", path,
                                       fd == -EBADF ? "not a regular file" : strerror(-fd));
        r = read_full_fd(fd, IMAGE_JSON_MAX, ret, ret_len);
        if (r == -EFBIG)
                return hutch_error_set(im->reterr, E2BIG,
                                       "'%.200s' of the image is larger than %u bytes", path,
                                       IMAGE_JSON_MAX);
        if (r < 0)
                return hutch_error_set(im->reterr, -r, "cannot read '%.200s' of the image: %s",
                                       path, strerror(-r));
        return 0;
}

/* Reads the blob @d names and checks it against @d (digest and size). */
static int blob_read(Import *im, const OciDescriptor *d, const char *what, char **ret,
                     size_t *ret_len) {
        _cleanup_free_ char *text = NULL;
        char path[128], got[IMAGE_DIGEST_LEN + 1];
        size_t len;
        int r;

        if (blob_path(d->digest, path, sizeof(path)) < 0)
                return -EINVAL;
        if (d->size > IMAGE_JSON_MAX)
                return hutch_error_set(im->reterr, E2BIG, "the %s is larger than %u bytes", what,
                                       IMAGE_JSON_MAX);
        r = source_read(im, path, &text, &len);
        if (r < 0)
                return r;
        digest_hex(text, len, got);
        if (len != d->size || strcmp(got, d->digest) != 0)
                return hutch_error_set(im->reterr, EBADMSG,
                                       "the %s blob is corrupt: %s (%" PRIu64
                                       " bytes) was expected, it is %s (%zu bytes)",
                                       what, d->digest, d->size, got, len);
        *ret = TAKE_PTR(text);
        *ret_len = len;
        return 0;
}

/* ---- the source ---- */

/* Copies @in_fd to the new file @name of the temp folder; returns it open
 * for reading at offset 0. */
static int spool(Import *im, int in_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = malloc(IO_BUF);

        if (!buf)
                return -ENOMEM;
        fd = openat(im->tmp_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return hutch_error_set(im->reterr, errno, "cannot spool the input: %m");
        for (;;) {
                ssize_t n = read(in_fd, buf, IO_BUF);
                int r;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return hutch_error_set(im->reterr, errno, "cannot read the input: %m");
                if (n == 0)
                        break;
                r = loop_write(fd, buf, (size_t)n);
                if (r < 0)
                        return hutch_error_set(im->reterr, -r, "cannot spool the input: %s",
                                               strerror(-r));
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

static int tar_open(Import *im, int fd, struct archive **ret) {
        _cleanup_(archive_read_freep) struct archive *a = archive_read_new();

        if (!a)
                return -ENOMEM;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return hutch_error_set(im->reterr, errno, "cannot read the archive: %m");
        if (archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
            archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
            archive_read_support_format_tar(a) != ARCHIVE_OK ||
            archive_read_open_fd(a, fd, IO_BUF) != ARCHIVE_OK)
                return hutch_error_set(im->reterr, EBADMSG, "not a tar archive: %s",
                                       archive_error_string(a) ?: "unknown error");
        *ret = TAKE_PTR(a);
        return 0;
}

static int tar_fail(Import *im, struct archive *a) {
        return hutch_error_set(im->reterr, EBADMSG, "the archive is corrupt or truncated: %s",
                               archive_error_string(a) ?: "unknown error");
}

/* Strips "./" prefixes. */
static const char *tar_name(const char *p) {
        while (p && p[0] == '.' && p[1] == '/')
                p += 2;
        return p;
}

/* 1 when the tar holds an image (index.json or manifest.json at its top),
 * 0 when it is a plain root filesystem. */
static int tar_is_image(Import *im, int fd) {
        _cleanup_(archive_read_freep) struct archive *a = NULL;
        struct archive_entry *e;
        int r;

        r = tar_open(im, fd, &a);
        if (r < 0)
                return r;
        for (;;) {
                const char *name;

                r = archive_read_next_header(a, &e);
                if (r == ARCHIVE_EOF)
                        return 0;
                if (r != ARCHIVE_OK)
                        return tar_fail(im, a);
                name = tar_name(archive_entry_pathname(e));
                if (name && archive_entry_filetype(e) == AE_IFREG &&
                    (strcmp(name, "index.json") == 0 || strcmp(name, "manifest.json") == 0 ||
                     strcmp(name, "oci-layout") == 0))
                        return 1;
        }
}

/* Opens the directory @rel below @root, creating what is missing one
 * component at a time. SECURITY: each step is resolved with
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS and created by a single name, so a
 * symlink the archive made earlier ("blobs -> /etc") is never followed. */
static int parent_open(int root, const char *rel) {
        _cleanup_free_ char *copy = strdup(rel);
        _cleanup_close_ int cur = -EBADF;
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        cur = openat_beneath(root, ".", O_PATH | O_DIRECTORY, 0);
        if (cur < 0)
                return cur;
        for (char *p = strtok_r(copy, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
                int next = openat_beneath(cur, p, O_PATH | O_DIRECTORY, 0);

                if (next == -ENOENT) {
                        if (mkdirat(cur, p, 0700) < 0 && errno != EEXIST)
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

/* Unpacks the image archive @fd into src/ of the temp folder: its regular
 * files and symlinks (lexically contained), nothing else. */
static int tar_extract(Import *im, int fd) {
        _cleanup_(archive_read_freep) struct archive *a = NULL;
        _cleanup_close_ int root = -EBADF;
        _cleanup_free_ char *buf = malloc(IO_BUF);
        struct archive_entry *e;
        unsigned n = 0;
        int r;

        if (!buf)
                return -ENOMEM;
        r = tar_open(im, fd, &a);
        if (r < 0)
                return r;
        if (mkdirat(im->tmp_fd, "src", 0700) < 0)
                return negative_errno();
        root = openat(im->tmp_fd, "src", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        for (;;) {
                _cleanup_close_ int pfd = -EBADF, out = -EBADF;
                _cleanup_free_ char *rel = NULL;
                const char *name, *why;
                mode_t type;
                char *slash;

                r = archive_read_next_header(a, &e);
                if (r == ARCHIVE_EOF)
                        break;
                if (r != ARCHIVE_OK)
                        return tar_fail(im, a);
                type = archive_entry_filetype(e);
                if ((type != AE_IFREG && type != AE_IFLNK) || archive_entry_hardlink(e))
                        continue;
                if (++n > SOURCE_FILES_MAX)
                        return hutch_error_set(im->reterr, E2BIG,
                                               "the archive holds more than %u files",
                                               SOURCE_FILES_MAX);
                rel = strdup(tar_name(archive_entry_pathname(e)) ?: "");
                if (!rel)
                        return -ENOMEM;
                r = snapshot_archive_relpath_check(rel, &why);
                if (r < 0)
                        return hutch_error_set(im->reterr, -r, "the archive has %s: '%.200s'", why,
                                               rel);
                slash = strrchr(rel, '/');
                if (slash) {
                        *slash = '\0';
                        pfd = parent_open(root, rel);
                        *slash = '/';
                        name = slash + 1;
                } else {
                        pfd = openat_beneath(root, ".", O_PATH | O_DIRECTORY, 0);
                        name = rel;
                }
                if (pfd < 0)
                        return hutch_error_set(im->reterr, pfd == -ELOOP ? EPERM : -pfd,
                                               "the archive's entry '%.200s' is not below a "
                                               "directory: %s",
                                               rel, strerror(-pfd));
                (void)unlinkat(pfd, name, 0);
                if (type == AE_IFLNK) {
                        const char *target = archive_entry_symlink(e);

                        /* Followed later, beneath src/ only (source_open()). */
                        if (!target || symlinkat(target, pfd, name) < 0)
                                return hutch_error_set(im->reterr, EINVAL,
                                                       "bad symlink '%.200s' in the archive", rel);
                        continue;
                }
                out = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (out < 0)
                        return hutch_error_set(im->reterr, errno, "cannot write '%.200s': %m", rel);
                for (;;) {
                        la_ssize_t got = archive_read_data(a, buf, IO_BUF);

                        if (got < 0)
                                return tar_fail(im, a);
                        if (got == 0)
                                break;
                        r = loop_write(out, buf, (size_t)got);
                        if (r < 0)
                                return hutch_error_set(im->reterr, -r, "cannot write '%.200s': %s",
                                                       rel, strerror(-r));
                }
        }
        im->src_fd = TAKE_FD(root);
        return 0;
}

/* ---- layers ---- */

typedef struct LayerIn {
        int fd;              /* the blob */
        const char *diff_id; /* expected, or NULL (a root filesystem tar) */
        const char *digest;  /* the blob's expected digest, or NULL */
        uint64_t size;       /* the blob's expected size (with @digest) */
        const char *media_type;
        size_t index;
} LayerIn;

static int layer_record_write(int dirfd, const ImageLayerResult *res, bool owners) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        root = json_pack("{s:s, s:I, s:I, s:I, s:I, s:b}", "diff_id", res->diff_id, "size",
                         (json_int_t)res->size, "tar_size", (json_int_t)res->tar_size, "entries",
                         (json_int_t)res->entries, "skipped_devices",
                         (json_int_t)res->skipped_devices, "owners", owners);
        if (!root)
                return -ENOMEM;
        text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
        if (!text)
                return -ENOMEM;
        fd = openat(dirfd, IMAGE_LAYER_RECORD, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600);
        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, text, strlen(text));
        if (r < 0)
                return r;
        return fsync(fd) < 0 ? negative_errno() : 0;
}

/* Reads layers/<hex>/layer.json of a layer in the store. */
static int layer_record_read(Import *im, const char *hex, ImageLayerResult *ret) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_free_ char *text = NULL;
        char path[128];
        int r;

        (void)snprintf(path, sizeof(path), "layers/%s/" IMAGE_LAYER_RECORD, hex);
        r = read_full_file_at(im->s->dirfd, path, O_NOFOLLOW, IMAGE_JSON_MAX, &text);
        if (r < 0)
                return r;
        root = json_loads(text, 0, NULL);
        if (!json_is_integer(json_object_get(root, "size")) ||
            !json_is_integer(json_object_get(root, "tar_size")))
                return -EBADMSG;
        *ret = (ImageLayerResult){
                .size = (uint64_t)json_integer_value(json_object_get(root, "size")),
                .tar_size = (uint64_t)json_integer_value(json_object_get(root, "tar_size")),
                .skipped_devices =
                        (uint64_t)json_integer_value(json_object_get(root, "skipped_devices")),
        };
        (void)snprintf(ret->diff_id, sizeof(ret->diff_id), IMAGE_DIGEST_PREFIX "%s", hex);
        return 0;
}

/* Puts the layer @in into the store (or finds it there); fills @ret. */
static int layer_import(Import *im, const LayerIn *in, ImageLayerResult *ret) {
        _cleanup_close_ int dfd = -EBADF, rootfd = -EBADF, owners = -EBADF;
        ImageLayerResult res;
        char name[32];
        int r, want;

        if (in->diff_id && image_store_has_layer(im->s, in->diff_id + 7) &&
            layer_record_read(im, in->diff_id + 7, ret) >= 0) {
                /* Content-addressed: that diff id's tree is there already. */
                ret->blob_size = in->size;
                return 0;
        }
        (void)snprintf(name, sizeof(name), "layer-%zu", in->index);
        if (mkdirat(im->tmp_fd, name, 0700) < 0)
                return hutch_error_set(im->reterr, errno, "cannot create a layer folder: %m");
        dfd = openat(im->tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0 || mkdirat(dfd, IMAGE_LAYER_ROOT, 0700) < 0)
                return hutch_error_set(im->reterr, errno, "cannot create a layer folder: %m");
        rootfd = openat(dfd, IMAGE_LAYER_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfd < 0)
                return negative_errno();
        if (im->owners == IMAGE_LAYER_OWNERS_CALLER) {
                owners = openat(dfd, IMAGE_LAYER_OWNERS,
                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (owners < 0)
                        return negative_errno();
        }
        r = image_layer_unpack(in->fd, rootfd, im->owners, owners, &res, im->reterr);
        if (r < 0) {
                char msg[HUTCH_ERROR_MSG_MAX - 32];

                if (!im->reterr)
                        return r;
                (void)snprintf(msg, sizeof(msg), "%.400s", im->reterr->msg);
                return hutch_error_set(im->reterr, -r, "layer %zu: %s", in->index, msg);
        }
        if (in->digest && (strcmp(res.blob_digest, in->digest) != 0 || res.blob_size != in->size))
                return hutch_error_set(im->reterr, EBADMSG,
                                       "layer %zu is corrupt: its blob should be %s (%" PRIu64
                                       " bytes), it is %s (%" PRIu64 " bytes)",
                                       in->index, in->digest, in->size, res.blob_digest,
                                       res.blob_size);
        if (in->diff_id && strcmp(res.diff_id, in->diff_id) != 0)
                return hutch_error_set(im->reterr, EBADMSG,
                                       "layer %zu is corrupt: the image config says its diff id "
                                       "is %s, its uncompressed tar is %s",
                                       in->index, in->diff_id, res.diff_id);
        if (in->media_type) {
                want = oci_layer_media_type_compression(in->media_type);
                if (want >= 0 && want != (int)res.compression)
                        return hutch_error_set(
                                im->reterr, EBADMSG,
                                "layer %zu is %s-compressed, its media type '%s' "
                                "says %s",
                                in->index, oci_compression_to_string(res.compression),
                                in->media_type, oci_compression_to_string((OciCompression)want));
        }
        r = layer_record_write(dfd, &res, owners >= 0);
        if (r < 0)
                return hutch_error_set(im->reterr, -r, "cannot write a layer record: %s",
                                       strerror(-r));
        if (owners >= 0 && fsync(owners) < 0)
                return negative_errno();
        (void)syncfs(dfd);
        /* Renamed into layers/ only once every layer is good
         * (layers_commit()): a bad layer leaves nothing in the store. */
        r = strv_extend(&im->pending, name);
        if (r >= 0)
                r = strv_extend(&im->pending, res.diff_id + 7);
        if (r < 0)
                return r;
        *ret = res;
        return 0;
}

/* ---- the image ---- */

typedef struct Parsed {
        char *manifest; /* the manifest's bytes */
        size_t manifest_len;
        char *config; /* the config's bytes */
        size_t config_len;
        OciManifest m;
        OciConfig c;
        char **names; /* the archive's own names */
} Parsed;

static void parsed_done(Parsed *p) {
        free(p->manifest);
        free(p->config);
        oci_manifest_done(&p->m);
        oci_config_done(&p->c);
        strv_free(p->names);
}

static int add_name(char ***names, const char *ref) {
        _cleanup_free_ char *norm = NULL;

        if (!ref || image_ref_normalize(ref, &norm) < 0 || strv_contains(*names, norm))
                return 0;
        return strv_push_take(names, TAKE_PTR(norm));
}

/* An OCI layout: index.json, its manifest (through nested indexes). */
static int parse_oci(Import *im, Parsed *p) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(oci_index_done) OciIndex ix = {};
        OciDescriptor pick = {};
        size_t len;
        int r, i;

        r = source_read(im, "index.json", &text, &len);
        if (r < 0)
                return r;
        r = oci_index_parse(text, len, &ix, im->reterr);
        if (r < 0)
                return r;
        for (unsigned depth = 0;; depth++) {
                _cleanup_(oci_index_done) OciIndex sub = {};
                const OciDescriptor *d;
                int kind;

                if (depth > INDEX_DEPTH_MAX)
                        return hutch_error_set(im->reterr, ELOOP,
                                               "image indexes nest deeper than %d",
                                               INDEX_DEPTH_MAX);
                i = ix.n_manifests == 1 ? 0 : oci_index_pick(&ix, im->reterr);
                if (ix.n_manifests == 0)
                        i = oci_index_pick(&ix, im->reterr);
                if (i < 0)
                        return i;
                d = &ix.manifests[i];
                if (d->os && (strcmp(d->os, "linux") != 0 || strcmp(d->architecture, "amd64") != 0))
                        return hutch_error_set(im->reterr, ENXIO,
                                               "the image is for %s/%s, not linux/amd64", d->os,
                                               d->architecture);
                if (depth == 0) {
                        r = add_name(&p->names, d->image_name);
                        if (r >= 0 && d->ref_name && strchr(d->ref_name, ':'))
                                r = add_name(&p->names, d->ref_name);
                        if (r < 0)
                                return r;
                }
                kind = oci_media_type_kind(d->media_type ?: OCI_MT_MANIFEST);
                if (kind < 0)
                        return hutch_error_set(im->reterr, EPROTONOSUPPORT,
                                               "unknown media type '%.100s' in the image index",
                                               d->media_type);
                free(text);
                text = NULL;
                r = blob_read(im, d, kind == 1 ? "image manifest" : "image index", &text, &len);
                if (r < 0)
                        return r;
                if (kind == 1) {
                        pick = *d;
                        break;
                }
                r = oci_index_parse(text, len, &sub, im->reterr);
                if (r < 0)
                        return r;
                oci_index_done(&ix);
                ix = sub;
                sub = (OciIndex){};
        }
        (void)pick;
        r = oci_manifest_parse(text, len, &p->m, im->reterr);
        if (r < 0)
                return r;
        p->manifest = TAKE_PTR(text);
        p->manifest_len = len;
        r = blob_read(im, &p->m.config, "image config", &p->config, &p->config_len);
        if (r < 0)
                return r;
        r = oci_config_parse(p->config, p->config_len, &p->c, im->reterr);
        if (r < 0)
                return r;
        if (strv_length(p->c.diff_ids) != p->m.n_layers)
                return hutch_error_set(im->reterr, EINVAL,
                                       "the image manifest lists %zu layers, its config %zu",
                                       p->m.n_layers, strv_length(p->c.diff_ids));
        return 0;
}

/* A manifest of our own for an image that came without one (docker save's
 * legacy format, a root filesystem tar): each layer described by its
 * uncompressed tar, whose digest is its diff id. */
static int manifest_synthesize(Parsed *p, const ImageLayerResult *layers, size_t n) {
        _cleanup_(json_decrefp) json_t *root = NULL, *arr = NULL;
        char cdigest[IMAGE_DIGEST_LEN + 1];

        digest_hex(p->config, p->config_len, cdigest);
        arr = json_array();
        if (!arr)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (json_array_append_new(arr, json_pack("{s:s, s:s, s:I}", "mediaType",
                                                         "application/vnd.oci.image.layer.v1.tar",
                                                         "digest", layers[i].diff_id, "size",
                                                         (json_int_t)layers[i].tar_size)) < 0)
                        return -ENOMEM;
        root = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:O}", "schemaVersion", 2, "mediaType",
                         OCI_MT_MANIFEST, "config", "mediaType", OCI_MT_CONFIG, "digest", cdigest,
                         "size", (json_int_t)p->config_len, "layers", arr);
        if (!root)
                return -ENOMEM;
        free(p->manifest);
        p->manifest = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        if (!p->manifest)
                return -ENOMEM;
        p->manifest_len = strlen(p->manifest);
        return 0;
}

/* Writes manifests/<hex> under the temp folder and renames it into place. */
static int image_commit(Import *im, Parsed *p, const ImageLayerResult *layers, char **ret_digest) {
        _cleanup_(image_freep) Image *rec = NULL;
        _cleanup_close_ int dfd = -EBADF;
        char digest[IMAGE_DIGEST_LEN + 1], cdigest[IMAGE_DIGEST_LEN + 1], dest[128];
        struct {
                const char *name;
                const char *data;
                size_t len;
        } files[] = {
                {IMAGE_MANIFEST_NAME, p->manifest, p->manifest_len},
                {IMAGE_CONFIG_NAME, p->config, p->config_len},
        };
        int r;

        digest_hex(p->manifest, p->manifest_len, digest);
        digest_hex(p->config, p->config_len, cdigest);
        rec = calloc(1, sizeof(Image));
        if (!rec)
                return -ENOMEM;
        rec->digest = strdup(digest);
        rec->config_digest = strdup(cdigest);
        rec->format = strdup(im->format);
        rec->layers = calloc(p->m.n_layers + 1, sizeof(ImageLayer));
        if (!rec->digest || !rec->config_digest || !rec->format || !rec->layers)
                return -ENOMEM;
        rec->imported_ms = time_realtime_ms();
        rec->user_owned = im->owners == IMAGE_LAYER_OWNERS_CALLER;
        for (size_t i = 0; i < p->m.n_layers; i++) {
                rec->n_layers++;
                rec->layers[i].diff_id = strdup(layers[i].diff_id);
                rec->layers[i].media_type = strdup(p->m.layers[i].media_type ?: "");
                if (!rec->layers[i].diff_id || !rec->layers[i].media_type)
                        return -ENOMEM;
                rec->layers[i].size = layers[i].size;
                rec->layers[i].blob_size = p->m.layers[i].size;
                rec->skipped_devices += layers[i].skipped_devices;
        }
        if (mkdirat(im->tmp_fd, "manifest", 0700) < 0)
                return negative_errno();
        dfd = openat(im->tmp_fd, "manifest", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_close_ int fd =
                        openat(dfd, files[i].name,
                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

                if (fd < 0)
                        return negative_errno();
                r = loop_write(fd, files[i].data, files[i].len);
                if (r < 0)
                        return r;
                if (fsync(fd) < 0)
                        return negative_errno();
        }
        r = image_record_write(dfd, rec);
        if (r < 0)
                return r;
        (void)fsync(dfd);
        (void)snprintf(dest, sizeof(dest), "manifests/%s", digest + 7);
        /* The commit point. The same image imported before: keep that. */
        if (renameat(im->tmp_fd, "manifest", im->s->dirfd, dest) < 0 && errno != EEXIST &&
            errno != ENOTEMPTY)
                return negative_errno();
        (void)fsync(im->s->dirfd);
        *ret_digest = strdup(digest);
        return *ret_digest ? 0 : -ENOMEM;
}

static int import_layers_oci(Import *im, Parsed *p, ImageLayerResult *out) {
        for (size_t i = 0; i < p->m.n_layers; i++) {
                const OciDescriptor *d = &p->m.layers[i];
                _cleanup_close_ int fd = -EBADF;
                char path[128];
                int r;

                if (blob_path(d->digest, path, sizeof(path)) < 0)
                        return -EINVAL;
                if (!image_store_has_layer(im->s, p->c.diff_ids[i] + 7)) {
                        fd = source_open(im, path);
                        if (fd < 0)
                                return hutch_error_set(im->reterr, fd == -EBADF ? EINVAL : -fd,
                                                       "layer %zu (%s) is missing from the image: "
                                                       "%s",
                                                       i, d->digest, strerror(-fd));
                }
                r = layer_import(im,
                                 &(LayerIn){.fd = fd,
                                            .diff_id = p->c.diff_ids[i],
                                            .digest = d->digest,
                                            .size = d->size,
                                            .media_type = d->media_type,
                                            .index = i},
                                 &out[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A `docker save` archive without index.json: manifest.json lists the
 * config and layer files by path; the layers are checked against the
 * config's diff ids. */
static int import_docker(Import *im, Parsed *p, const char *want_name, ImageLayerResult **ret) {
        _cleanup_(docker_save_done) DockerSave ds = {};
        _cleanup_free_ ImageLayerResult *out = NULL;
        _cleanup_free_ char *text = NULL, *norm = NULL;
        const DockerSaveImage *pick = NULL;
        size_t len, n;
        int r;

        r = source_read(im, "manifest.json", &text, &len);
        if (r < 0)
                return r;
        r = docker_save_parse(text, len, &ds, im->reterr);
        if (r < 0)
                return r;
        if (want_name && image_ref_normalize(want_name, &norm) >= 0)
                for (size_t i = 0; i < ds.n_images && !pick; i++)
                        STRV_FOREACH(t, ds.images[i].repo_tags) {
                                _cleanup_free_ char *tn = NULL;

                                if (image_ref_normalize(*t, &tn) >= 0 && strcmp(tn, norm) == 0)
                                        pick = &ds.images[i];
                        }
        if (!pick && ds.n_images == 1)
                pick = &ds.images[0];
        if (!pick)
                return hutch_error_set(im->reterr, EINVAL,
                                       "the archive holds %zu images: name the one to import "
                                       "(one of its RepoTags)",
                                       ds.n_images);
        STRV_FOREACH(t, pick->repo_tags) {
                r = add_name(&p->names, *t);
                if (r < 0)
                        return r;
        }
        r = source_read(im, pick->config, &p->config, &p->config_len);
        if (r < 0)
                return r;
        r = oci_config_parse(p->config, p->config_len, &p->c, im->reterr);
        if (r < 0)
                return r;
        n = strv_length(pick->layers);
        if (strv_length(p->c.diff_ids) != n)
                return hutch_error_set(im->reterr, EINVAL,
                                       "the archive's manifest.json lists %zu layers, the image "
                                       "config %zu",
                                       n, strv_length(p->c.diff_ids));
        out = calloc(n + 1, sizeof(ImageLayerResult));
        p->m.layers = calloc(n + 1, sizeof(OciDescriptor));
        if (!out || !p->m.layers)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int fd = -EBADF;

                p->m.n_layers++;
                p->m.layers[i].media_type = strdup("application/vnd.oci.image.layer.v1.tar");
                if (!p->m.layers[i].media_type)
                        return -ENOMEM;
                if (!image_store_has_layer(im->s, p->c.diff_ids[i] + 7)) {
                        fd = source_open(im, pick->layers[i]);
                        if (fd < 0)
                                return hutch_error_set(im->reterr, fd == -EBADF ? EINVAL : -fd,
                                                       "layer %zu ('%.200s') is missing from the "
                                                       "archive: %s",
                                                       i, pick->layers[i], strerror(-fd));
                }
                r = layer_import(im, &(LayerIn){.fd = fd, .diff_id = p->c.diff_ids[i], .index = i},
                                 &out[i]);
                if (r < 0)
                        return r;
                p->m.layers[i].size = out[i].tar_size;
        }
        r = manifest_synthesize(p, out, n);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(out);
        return 0;
}

/* A plain root filesystem tar: one layer, a minimal config. */
static int import_rootfs(Import *im, Parsed *p, int fd, ImageLayerResult **ret) {
        _cleanup_free_ ImageLayerResult *out = calloc(2, sizeof(ImageLayerResult));
        _cleanup_(json_decrefp) json_t *cfg = NULL;
        int r;

        if (!out)
                return -ENOMEM;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        r = layer_import(im, &(LayerIn){.fd = fd, .index = 0}, &out[0]);
        if (r < 0)
                return r;
        cfg = json_pack("{s:s, s:s, s:{}, s:{s:s, s:[s]}}", "architecture", "amd64", "os", "linux",
                        "config", "rootfs", "type", "layers", "diff_ids", out[0].diff_id);
        if (!cfg)
                return -ENOMEM;
        p->config = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
        if (!p->config)
                return -ENOMEM;
        p->config_len = strlen(p->config);
        r = oci_config_parse(p->config, p->config_len, &p->c, im->reterr);
        if (r < 0)
                return r;
        p->m.layers = calloc(2, sizeof(OciDescriptor));
        if (!p->m.layers)
                return -ENOMEM;
        p->m.n_layers = 1;
        p->m.layers[0].media_type = strdup("application/vnd.oci.image.layer.v1.tar");
        if (!p->m.layers[0].media_type)
                return -ENOMEM;
        p->m.layers[0].size = out[0].tar_size;
        r = manifest_synthesize(p, out, 1);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(out);
        return 0;
}

/* Whether the caller can give files any owner: root of the initial user
 * namespace (a full uid_map). */
static bool can_keep_ids(void) {
        _cleanup_free_ char *map = NULL;

        if (geteuid() != 0)
                return false;
        if (read_full_file("/proc/self/uid_map", 4096, &map) < 0)
                return false;
        return strstr(map, "4294967295") != NULL;
}

int image_store_import(ImageStore *s, const char *path, const char *name, int stdin_fd, Image **ret,
                       HutchError *reterr) {
        _cleanup_(import_done) Import im = {
                .s = s,
                .tmp_fd = -EBADF,
                .hold_fd = -EBADF,
                .src_fd = -EBADF,
                .reterr = reterr,
        };
        _cleanup_(parsed_done) Parsed p = {};
        _cleanup_free_ ImageLayerResult *layers = NULL;
        _cleanup_free_ char *norm = NULL, *digest = NULL;
        _cleanup_close_ int lock = -EBADF, file = -EBADF;
        struct stat st;
        int r;

        if (!s || !path)
                return hutch_error_set(reterr, EINVAL, "bad arguments to image import");
        if (name) {
                const char *ignored;

                /* A registries.conf that does not parse: named. */
                r = registry_default_domain(&ignored, reterr);
                if (r < 0)
                        return r;
                r = image_ref_normalize(name, &norm);
                if (r < 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "'%.300s' is not an image name: NAME[:TAG], "
                                               "lowercase",
                                               name);
        }
        im.owners = can_keep_ids() ? IMAGE_LAYER_OWNERS_KEEP : IMAGE_LAYER_OWNERS_CALLER;
        r = image_store_lock(s, LOCK_SH, &lock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot lock the image store: %s", strerror(-r));
        r = image_store_temp(s, &im.tmp, &im.hold_fd, reterr);
        if (r < 0)
                return r;
        im.tmp_fd = openat(s->dirfd, im.tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (im.tmp_fd < 0)
                return negative_errno();

        if (strcmp(path, "-") == 0) {
                file = spool(&im, stdin_fd, "input");
                if (file < 0)
                        return file;
        } else {
                int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

                if (fd < 0 || fstat(fd, &st) < 0) {
                        r = hutch_error_set(reterr, errno, "cannot open '%.300s': %m", path);
                        (void)safe_close(fd);
                        return r;
                }
                if (S_ISDIR(st.st_mode))
                        im.src_fd = fd;
                else if (S_ISREG(st.st_mode))
                        file = fd;
                else {
                        (void)close(fd);
                        return hutch_error_set(reterr, EINVAL,
                                               "'%.300s' is not a directory or a file", path);
                }
        }
        if (file >= 0) {
                r = tar_is_image(&im, file);
                if (r < 0)
                        return r;
                if (r > 0) {
                        r = tar_extract(&im, file);
                        if (r < 0)
                                return r;
                } else {
                        im.format = "rootfs-tar";
                        r = import_rootfs(&im, &p, file, &layers);
                        if (r < 0)
                                return r;
                }
        }
        if (!im.format) {
                if (faccessat(im.src_fd, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
                        im.format = file >= 0 ? "oci-archive" : "oci-layout";
                        r = parse_oci(&im, &p);
                        if (r < 0)
                                return r;
                        layers = calloc(p.m.n_layers + 1, sizeof(ImageLayerResult));
                        if (!layers)
                                return -ENOMEM;
                        r = import_layers_oci(&im, &p, layers);
                } else if (faccessat(im.src_fd, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
                        im.format = "docker-archive";
                        r = import_docker(&im, &p, name, &layers);
                } else
                        r = hutch_error_set(reterr, EPROTONOSUPPORT,
                                            "'%.300s' is not an image: no index.json (OCI "
                                            "layout) or manifest.json (docker save)",
                                            path);
                if (r < 0)
                        return r;
        }
        r = layers_commit(&im);
        if (r < 0)
                return r;
        r = image_commit(&im, &p, layers, &digest);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot store the image: %s", strerror(-r));
        if (norm) {
                strv_free(p.names);
                p.names = NULL;
                r = strv_extend(&p.names, norm);
                if (r < 0)
                        return r;
        }
        r = image_store_tag(s, p.names, digest, reterr);
        if (r < 0)
                return r;
        lock = safe_close(lock);
        if (ret)
                return image_store_resolve(s, digest, ret, reterr);
        return 0;
}
