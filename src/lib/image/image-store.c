/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "fd-util.h"
#include "image/image-internal.h"
#include "image/image-oci.h"
#include "image/registries-conf.h"
#include "rm-rf.h"
#include "strv.h"

/* The image store (image-store.h): records, tags, references, rm and gc.
 * Nothing here reads an archive (image-import.c does), so the hutch binary
 * links this without libarchive. */

#define TAGS_NAME "tags.json"
#define TAG_MAX 128
/* The shortest id prefix accepted, as Docker's short ids. */
#define ID_PREFIX_MIN 12

Image *image_free(Image *im) {
        if (!im)
                return NULL;
        free(im->digest);
        free(im->config_digest);
        strv_free(im->names);
        for (size_t i = 0; im->layers && i < im->n_layers; i++) {
                free(im->layers[i].diff_id);
                free(im->layers[i].path);
                free(im->layers[i].media_type);
        }
        free(im->layers);
        image_config_done(&im->config);
        free(im->format);
        free(im);
        return NULL;
}

void image_list_free(Image **l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                image_free(l[i]);
        free(l);
}

ImageStore *image_store_free(ImageStore *s) {
        if (!s)
                return NULL;
        free(s->home);
        free(s->dir);
        (void)safe_close(s->dirfd);
        free(s);
        return NULL;
}

int image_store_open(const Store *store, ImageStore **ret, HutchError *reterr) {
        _cleanup_(image_store_freep) ImageStore *s = NULL;
        static const char *const subdirs[] = {"layers", "manifests", "refs"};
        int r;

        if (!store || !store->home)
                return hutch_error_set(reterr, EINVAL, "no store to open the images of");
        s = calloc(1, sizeof(ImageStore));
        if (!s)
                return -ENOMEM;
        s->dirfd = -EBADF;
        s->home = strdup(store->home);
        if (!s->home || asprintf(&s->dir, "%s/" IMAGE_STORE_DIR, store->home) < 0)
                return -ENOMEM;
        /* SECURITY: 0700 and ours: as root the layers hold the image's own
         * ids (setuid binaries among them) that no host user may reach. */
        r = mkdir_private(s->dir);
        if (r < 0)
                return mkdir_private_error("image store", s->dir, r, reterr);
        s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s->dirfd < 0)
                return hutch_error_set(reterr, errno, "cannot open the image store %s: %m", s->dir);
        for (size_t i = 0; i < ELEMENTSOF(subdirs); i++)
                if (mkdirat(s->dirfd, subdirs[i], 0700) < 0 && errno != EEXIST)
                        return hutch_error_set(reterr, errno, "cannot create %s/%s: %m", s->dir,
                                               subdirs[i]);
        *ret = TAKE_PTR(s);
        return 0;
}

int image_store_lock(ImageStore *s, int how, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(s->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        while (flock(fd, how) < 0)
                if (errno != EINTR)
                        return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int image_store_temp(ImageStore *s, char **ret_name, int *ret_hold, HutchError *reterr) {
        _cleanup_free_ char *path = NULL, *name = NULL;
        int r;

        if (asprintf(&path, "%s/.tmp-XXXXXX", s->dir) < 0)
                return -ENOMEM;
        if (!mkdtemp(path))
                return hutch_error_set(reterr, errno, "cannot create a folder in %s: %m", s->dir);
        r = store_temp_hold(path, ret_hold, reterr);
        if (r < 0) {
                (void)rmdir(path);
                return r;
        }
        name = strdup(strrchr(path, '/') + 1);
        if (!name) {
                *ret_hold = safe_close(*ret_hold);
                (void)rmdir(path);
                return -ENOMEM;
        }
        *ret_name = TAKE_PTR(name);
        return 0;
}

bool image_store_has_layer(ImageStore *s, const char *hex) {
        char path[128];
        struct stat st;

        (void)snprintf(path, sizeof(path), "layers/%s/" IMAGE_LAYER_ROOT, hex);
        return fstatat(s->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* ---- references ---- */

static bool tag_is_valid(const char *t) {
        size_t n = strlen(t);

        /* Docker's: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} */
        if (n == 0 || n > TAG_MAX || !(isalnum((unsigned char)t[0]) || t[0] == '_'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isascii((unsigned char)t[i]) ||
                    !(isalnum((unsigned char)t[i]) || strchr("_.-", t[i])))
                        return false;
        return true;
}

/* NAME: '/'-separated components of [a-z0-9._-] (each starting and ending
 * with a letter or digit); the first may be a host with a port. */
static bool name_is_valid(const char *name, size_t n) {
        size_t start = 0;
        bool first = true;

        if (n == 0 || n > IMAGE_REF_MAX)
                return false;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && name[i] != '/')
                        continue;
                if (i == start)
                        return false;
                if (!isalnum((unsigned char)name[start]) || !isalnum((unsigned char)name[i - 1]))
                        return false;
                for (size_t j = start; j < i; j++) {
                        unsigned char c = (unsigned char)name[j];

                        if (isascii(c) && (islower(c) || isdigit(c) || strchr("._-", c)))
                                continue;
                        /* host:port or an uppercase host, only before a '/' */
                        if (first && i < n && isascii(c) && (isupper(c) || c == ':'))
                                continue;
                        return false;
                }
                first = false;
                start = i + 1;
        }
        return true;
}

/* Splits @ref into NAME and TAG (NULL when none) at the last ':' after the
 * last '/'. */
static void ref_split(const char *ref, size_t *ret_name_len, const char **ret_tag) {
        const char *slash = strrchr(ref, '/'), *colon = strrchr(ref, ':');

        if (colon && (!slash || colon > slash)) {
                *ret_name_len = (size_t)(colon - ref);
                *ret_tag = colon + 1;
        } else {
                *ret_name_len = strlen(ref);
                *ret_tag = NULL;
        }
}

static bool hex_prefix_is_valid(const char *s) {
        size_t n = strlen(s);

        return n >= ID_PREFIX_MIN && n <= IMAGE_DIGEST_HEX_LEN &&
               strspn(s, "0123456789abcdef") == n;
}

/* The digest part of "NAME@sha256:..." or "sha256:...", or NULL. */
static const char *ref_digest(const char *ref) {
        const char *at = strchr(ref, '@');

        return at ? at + 1 : strncmp(ref, IMAGE_DIGEST_PREFIX, 7) == 0 ? ref : NULL;
}

bool image_ref_is_valid(const char *ref) {
        const char *tag, *digest;
        size_t n;

        if (!ref || strlen(ref) > IMAGE_REF_MAX + IMAGE_DIGEST_LEN + 1)
                return false;
        digest = ref_digest(ref);
        if (digest) {
                if (!oci_digest_is_valid(digest))
                        return false;
                if (digest == ref)
                        return true;
                n = (size_t)(digest - 1 - ref);
                return name_is_valid(ref, n) || false;
        }
        if (hex_prefix_is_valid(ref))
                return true;
        ref_split(ref, &n, &tag);
        return name_is_valid(ref, n) && (!tag || tag_is_valid(tag));
}

/* Whether the first component of @name (of @n bytes) is a registry host:
 * Docker's rule, a '.' or a ':' in it, or "localhost", and a '/' after. */
static bool name_has_domain(const char *name, size_t n) {
        const char *slash = memchr(name, '/', n);
        size_t len;

        if (!slash)
                return false;
        len = (size_t)(slash - name);
        return memchr(name, '.', len) || memchr(name, ':', len) ||
               (len == 9 && strncmp(name, "localhost", 9) == 0);
}

int image_ref_normalize(const char *ref, char **ret) {
        const char *tag, *domain = NULL, *library = "";
        size_t n, dn;
        char *s;
        int r;

        if (!ref || ref_digest(ref) || strlen(ref) > IMAGE_REF_MAX)
                return -EINVAL;
        ref_split(ref, &n, &tag);
        if (!name_is_valid(ref, n) || (tag && !tag_is_valid(tag)))
                return -EINVAL;
        r = registry_default_domain(&domain, NULL);
        if (r < 0)
                return r;
        /* As Docker writes references, with the configured default
         * registry D: "busybox" is D/library/busybox, "me/box" D/me/box,
         * "D/busybox" D/library/busybox. With none configured, a name
         * without a registry stays as it is (an image of this store only). */
        dn = domain ? strlen(domain) : 0;
        if (domain && !name_has_domain(ref, n)) {
                if (!memchr(ref, '/', n))
                        library = "library/";
        } else if (domain && n > dn + 1 && strncmp(ref, domain, dn) == 0 && ref[dn] == '/' &&
                   !memchr(ref + dn + 1, '/', n - dn - 1)) {
                library = "library/";
                ref += dn + 1;
                n -= dn + 1;
        } else
                domain = NULL;
        if (asprintf(&s, "%s%s%s%.*s:%s", domain ? domain : "", domain ? "/" : "", library, (int)n,
                     ref, tag ?: "latest") < 0)
                return -ENOMEM;
        if (strlen(s) > IMAGE_REF_MAX + 32) {
                free(s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

/* The canonical name of @ref's [aliases] value (a short name that has one:
 * what a pull of it stored), or -ENOENT. Not with $HUTCH_REGISTRY_DEFAULT,
 * which says alone what a short name means. */
static int image_ref_normalize_alias(const char *ref, char **ret) {
        _cleanup_free_ char *shortname = NULL, *aliased = NULL;
        const char *tag, *value, *where, *env = getenv("HUTCH_REGISTRY_DEFAULT");
        const RegistriesConf *c;
        size_t n;
        int r;

        if (!ref || ref_digest(ref) || strlen(ref) > IMAGE_REF_MAX || (env && *env))
                return -ENOENT;
        ref_split(ref, &n, &tag);
        if (name_has_domain(ref, n))
                return -ENOENT;
        shortname = strndup(ref, n);
        if (!shortname)
                return -ENOMEM;
        r = registries_conf_get(&c, NULL);
        if (r < 0)
                return r;
        if (!registries_conf_alias(c, shortname, &value, &where))
                return -ENOENT;
        if (asprintf(&aliased, "%s:%s", value, tag ?: "latest") < 0) {
                aliased = NULL;
                return -ENOMEM;
        }
        return image_ref_normalize(aliased, ret);
}

const char *image_ref_familiar(const char *name) {
        const char *domain = NULL;
        size_t dn;

        if (!name)
                return NULL;
        if (registry_default_domain(&domain, NULL) <= 0)
                return name;
        dn = strlen(domain);
        if (strncmp(name, domain, dn) != 0 || name[dn] != '/')
                return name;
        if (strncmp(name + dn + 1, "library/", 8) == 0)
                return name + dn + 9;
        return name + dn + 1;
}

/* ---- tags.json ---- */

static int tags_load(ImageStore *s, json_t **ret) {
        _cleanup_free_ char *text = NULL;
        json_t *root;
        int r;

        r = read_full_file_at(s->dirfd, TAGS_NAME, O_NOFOLLOW, IMAGE_JSON_MAX, &text);
        if (r == -ENOENT) {
                root = json_object();
                if (!root)
                        return -ENOMEM;
                *ret = root;
                return 0;
        }
        if (r < 0)
                return r;
        root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(root)) {
                json_decref(root);
                return -EBADMSG;
        }
        *ret = root;
        return 0;
}

static int tags_save(ImageStore *s, json_t *tags) {
        _cleanup_free_ char *text = json_dumps(tags, JSON_SORT_KEYS | JSON_INDENT(1));

        if (!text)
                return -ENOMEM;
        return write_file_atomic(s->dir, TAGS_NAME, text, strlen(text));
}

static int tags_lock(ImageStore *s, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(s->dirfd, "tags.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int image_store_tag(ImageStore *s, char *const *names, const char *digest, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *tags = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        if (strv_length(names) == 0)
                return 0;
        r = tags_lock(s, &lock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot lock the image tags: %s", strerror(-r));
        r = tags_load(s, &tags);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read %s/" TAGS_NAME ": %s", s->dir,
                                       strerror(-r));
        for (size_t i = 0; names[i]; i++)
                if (json_object_set_new(tags, names[i], json_string(digest)) < 0)
                        return -ENOMEM;
        r = tags_save(s, tags);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot write %s/" TAGS_NAME ": %s", s->dir,
                                       strerror(-r));
        return 0;
}

/* The names in @tags that point at @digest, sorted. */
static int tags_names_of(json_t *tags, const char *digest, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *key;
        json_t *v;

        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_object_foreach(tags, key, v) if (json_is_string(v) &&
                                              strcmp(json_string_value(v), digest) == 0 &&
                                              strv_extend(&l, key) < 0) return -ENOMEM;
        if (strv_length(l) > 1)
                qsort(l, strv_length(l), sizeof(char *),
                      (int (*)(const void *, const void *))strcmp);
        *ret = TAKE_PTR(l);
        return 0;
}

/* ---- records ---- */

int image_record_write(int dirfd, const Image *im) {
        _cleanup_(json_decrefp) json_t *root = NULL, *layers = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        layers = json_array();
        if (!layers)
                return -ENOMEM;
        for (size_t i = 0; i < im->n_layers; i++) {
                const ImageLayer *l = &im->layers[i];

                if (json_array_append_new(layers, json_pack("{s:s, s:I, s:I, s:s?}", "diff_id",
                                                            l->diff_id, "size", (json_int_t)l->size,
                                                            "blob_size", (json_int_t)l->blob_size,
                                                            "media_type", l->media_type)) < 0)
                        return -ENOMEM;
        }
        root = json_pack(
                "{s:i, s:s, s:s, s:I, s:s, s:I, s:b, s:O}", "format_version", IMAGE_RECORD_VERSION,
                "digest", im->digest, "config_digest", im->config_digest, "imported_ms",
                (json_int_t)im->imported_ms, "format", im->format ?: "unknown", "skipped_devices",
                (json_int_t)im->skipped_devices, "user_owned", im->user_owned, "layers", layers);
        if (!root)
                return -ENOMEM;
        text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
        if (!text)
                return -ENOMEM;
        fd = openat(dirfd, IMAGE_RECORD_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600);
        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, text, strlen(text));
        if (r < 0)
                return r;
        return fsync(fd) < 0 ? negative_errno() : 0;
}

static int json_u64(json_t *o, const char *key, uint64_t *ret) {
        json_t *v = json_object_get(o, key);

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return -EBADMSG;
        *ret = (uint64_t)json_integer_value(v);
        return 0;
}

static int json_strdup(json_t *o, const char *key, bool optional, char **ret) {
        json_t *v = json_object_get(o, key);

        if (!v && optional) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return -EBADMSG;
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

/* Loads manifests/<@hex> (names from @tags). */
static int image_load(ImageStore *s, const char *hex, json_t *tags, Image **ret,
                      HutchError *reterr) {
        _cleanup_(image_freep) Image *im = NULL;
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_free_ char *text = NULL, *config = NULL, *dir = NULL;
        json_t *layers, *v;
        size_t config_len = 0;
        int r;

        if (asprintf(&dir, "manifests/%s", hex) < 0)
                return -ENOMEM;
        {
                _cleanup_close_ int dfd =
                        openat(s->dirfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (dfd < 0)
                        return hutch_error_set(reterr, errno, "no image sha256:%s: %m", hex);
                r = read_full_file_at(dfd, IMAGE_RECORD_NAME, O_NOFOLLOW, IMAGE_JSON_MAX, &text);
                if (r >= 0) {
                        _cleanup_close_ int cfd =
                                openat(dfd, IMAGE_CONFIG_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

                        r = cfd < 0 ? negative_errno()
                                    : read_full_fd(cfd, IMAGE_JSON_MAX, &config, &config_len);
                }
                if (r < 0)
                        return hutch_error_set(reterr, r == -ENOENT ? EBADMSG : -r,
                                               "the record of image sha256:%s is damaged: %s", hex,
                                               strerror(-r));
        }
        root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
        im = calloc(1, sizeof(Image));
        if (!im)
                return -ENOMEM;
        v = json_object_get(root, "format_version");
        layers = json_object_get(root, "layers");
        if (!json_is_object(root) || !json_is_integer(v) ||
            json_integer_value(v) != IMAGE_RECORD_VERSION || !json_is_array(layers) ||
            json_array_size(layers) > IMAGE_LAYERS_MAX ||
            json_strdup(root, "digest", false, &im->digest) < 0 ||
            json_strdup(root, "config_digest", false, &im->config_digest) < 0 ||
            json_strdup(root, "format", false, &im->format) < 0 ||
            json_u64(root, "imported_ms", &im->imported_ms) < 0 ||
            json_u64(root, "skipped_devices", &im->skipped_devices) < 0 ||
            !json_is_boolean(json_object_get(root, "user_owned")) ||
            !oci_digest_is_valid(im->digest) || strcmp(im->digest + 7, hex) != 0)
                return hutch_error_set(reterr, EBADMSG, "the record of image sha256:%s is damaged",
                                       hex);
        im->user_owned = json_is_true(json_object_get(root, "user_owned"));
        im->layers = calloc(json_array_size(layers) + 1, sizeof(ImageLayer));
        if (!im->layers)
                return -ENOMEM;
        for (size_t i = 0; i < json_array_size(layers); i++) {
                json_t *l = json_array_get(layers, i);
                ImageLayer *out = &im->layers[i];

                im->n_layers++;
                if (json_strdup(l, "diff_id", false, &out->diff_id) < 0 ||
                    json_strdup(l, "media_type", true, &out->media_type) < 0 ||
                    json_u64(l, "size", &out->size) < 0 ||
                    json_u64(l, "blob_size", &out->blob_size) < 0 ||
                    !oci_digest_is_valid(out->diff_id))
                        return hutch_error_set(reterr, EBADMSG,
                                               "the record of image sha256:%s is damaged", hex);
                if (asprintf(&out->path, "%s/layers/%s/" IMAGE_LAYER_ROOT, s->dir,
                             out->diff_id + 7) < 0) {
                        out->path = NULL;
                        return -ENOMEM;
                }
        }
        r = image_config_parse(config, config_len, &im->config, reterr);
        if (r < 0)
                return r;
        if (tags) {
                r = tags_names_of(tags, im->digest, &im->names);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(im);
        return 0;
}

static bool manifest_exists(ImageStore *s, const char *hex) {
        char path[128];
        struct stat st;

        (void)snprintf(path, sizeof(path), "manifests/%s/" IMAGE_RECORD_NAME, hex);
        return fstatat(s->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The complete images' hex digests, sorted. */
static int manifests_list(ImageStore *s, char ***ret) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct dirent *de;

        fd = openat(s->dirfd, "manifests", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        while ((errno = 0, de = readdir_no_dot(d))) {
                if (strlen(de->d_name) != IMAGE_DIGEST_HEX_LEN ||
                    strspn(de->d_name, "0123456789abcdef") != IMAGE_DIGEST_HEX_LEN ||
                    !manifest_exists(s, de->d_name))
                        continue;
                if (strv_extend(&l, de->d_name) < 0)
                        return -ENOMEM;
        }
        if (errno != 0)
                return negative_errno();
        if (strv_length(l) > 1)
                qsort(l, strv_length(l), sizeof(char *),
                      (int (*)(const void *, const void *))strcmp);
        *ret = TAKE_PTR(l);
        return 0;
}

/* Finds the hex digest @ref names, with @tags loaded; *@ret_by_tag says
 * whether it was found by a NAME:TAG (set in *@ret_tag, may be NULL). */
static int ref_find(ImageStore *s, const char *ref, json_t *tags, char **ret_hex, char **ret_tag,
                    HutchError *reterr) {
        _cleanup_free_ char *norm = NULL, *found = NULL;
        const char *digest = NULL, *default_domain;
        int r;

        if (!image_ref_is_valid(ref))
                return hutch_error_set(reterr, EINVAL,
                                       "'%.300s' is not an image name (NAME[:TAG] or a digest)",
                                       ref);
        digest = ref_digest(ref);
        if (digest) {
                if (!manifest_exists(s, digest + 7))
                        return hutch_error_set(reterr, ENOENT, "no image '%s'", ref);
                found = strdup(digest + 7);
                if (!found)
                        return -ENOMEM;
                *ret_hex = TAKE_PTR(found);
                if (ret_tag)
                        *ret_tag = NULL;
                return 0;
        }
        /* A registries.conf that does not parse: its file and line, not
         * "no image" (the name's meaning depends on it). */
        r = registry_default_domain(&default_domain, reterr);
        if (r < 0)
                return r;
        /* The name, then (a short name with an [aliases] entry) the
         * name a pull of it stored. */
        for (int pass = 0; pass < 2; pass++) {
                json_t *v;

                norm = mfree(norm);
                if ((pass == 0 ? image_ref_normalize(ref, &norm)
                               : image_ref_normalize_alias(ref, &norm)) < 0)
                        continue;
                v = json_object_get(tags, norm);
                if (json_is_string(v) && oci_digest_is_valid(json_string_value(v)) &&
                    manifest_exists(s, json_string_value(v) + 7)) {
                        found = strdup(json_string_value(v) + 7);
                        if (!found)
                                return -ENOMEM;
                        *ret_hex = TAKE_PTR(found);
                        if (ret_tag)
                                *ret_tag = TAKE_PTR(norm);
                        return 0;
                }
        }
        if (hex_prefix_is_valid(ref)) {
                _cleanup_strv_free_ char **all = NULL;

                r = manifests_list(s, &all);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot list the images: %s",
                                               strerror(-r));
                STRV_FOREACH(h, all) {
                        if (strncmp(*h, ref, strlen(ref)) != 0)
                                continue;
                        if (found)
                                return hutch_error_set(reterr, ENOTUNIQ,
                                                       "'%s' names more than one image", ref);
                        found = strdup(*h);
                        if (!found)
                                return -ENOMEM;
                }
                if (found) {
                        *ret_hex = TAKE_PTR(found);
                        if (ret_tag)
                                *ret_tag = NULL;
                        return 0;
                }
        }
        return hutch_error_set(reterr, ENOENT, "no image '%s'", ref);
}

int image_store_resolve(ImageStore *s, const char *ref, Image **ret, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *tags = NULL;
        _cleanup_free_ char *hex = NULL;
        int r;

        r = tags_load(s, &tags);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read %s/" TAGS_NAME ": %s", s->dir,
                                       strerror(-r));
        r = ref_find(s, ref, tags, &hex, NULL, reterr);
        if (r < 0)
                return r;
        return image_load(s, hex, tags, ret, reterr);
}

int image_store_list(ImageStore *s, Image ***ret, size_t *ret_n, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *tags = NULL;
        _cleanup_strv_free_ char **all = NULL;
        Image **l;
        size_t n = 0;
        int r;

        r = tags_load(s, &tags);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read %s/" TAGS_NAME ": %s", s->dir,
                                       strerror(-r));
        r = manifests_list(s, &all);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot list the images: %s", strerror(-r));
        l = calloc(strv_length(all) + 1, sizeof(Image *));
        if (!l)
                return -ENOMEM;
        STRV_FOREACH(h, all) {
                r = image_load(s, *h, tags, &l[n], reterr);
                if (r < 0) {
                        image_list_free(l, n);
                        return r;
                }
                n++;
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

/* ---- in-use marks ---- */

static int holder_check(const char *digest, const char *kind, const char *holder,
                        HutchError *reterr) {
        if (!oci_digest_is_valid(digest))
                return hutch_error_set(reterr, EINVAL, "'%.80s' is not an image digest",
                                       digest ?: "");
        if (!kind || (strcmp(kind, "sandbox") != 0 && strcmp(kind, "snapshot") != 0 &&
                      strcmp(kind, "run") != 0))
                return hutch_error_set(reterr, EINVAL,
                                       "an image user is a sandbox, a snapshot or a run");
        if (!holder || !store_name_is_valid(holder))
                return hutch_error_set(reterr, EINVAL, "'%.80s' is not a sandbox or snapshot name",
                                       holder ?: "");
        return 0;
}

int image_store_use(ImageStore *s, const char *digest, const char *kind, const char *holder,
                    HutchError *reterr) {
        _cleanup_close_ int lock = -EBADF, fd = -EBADF;
        char path[256];
        int r;

        r = holder_check(digest, kind, holder, reterr);
        if (r < 0)
                return r;
        r = image_store_lock(s, LOCK_SH, &lock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot lock the image store: %s", strerror(-r));
        if (!manifest_exists(s, digest + 7))
                return hutch_error_set(reterr, ENOENT, "no image %s", digest);
        (void)snprintf(path, sizeof(path), "refs/%s", digest + 7);
        if (mkdirat(s->dirfd, path, 0700) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot mark image %s in use: %m", digest);
        (void)snprintf(path, sizeof(path), "refs/%s/%s:%s", digest + 7, kind, holder);
        fd = openat(s->dirfd, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot mark image %s in use: %m", digest);
        return 0;
}

int image_store_unuse(ImageStore *s, const char *digest, const char *kind, const char *holder,
                      HutchError *reterr) {
        char path[256];
        int r;

        r = holder_check(digest, kind, holder, reterr);
        if (r < 0)
                return r;
        (void)snprintf(path, sizeof(path), "refs/%s/%s:%s", digest + 7, kind, holder);
        if (unlinkat(s->dirfd, path, 0) < 0 && errno != ENOENT)
                return hutch_error_set(reterr, errno, "cannot unmark image %s: %m", digest);
        return 0;
}

/* Whether "PID-START" (image_store_run_holder()) is a process that
 * runs. */
static bool run_is_live(const char *holder) {
        _cleanup_free_ char *want = NULL;
        int pid;
        int r;

        if (sscanf(holder, "%d-", &pid) != 1 || pid <= 0)
                return false;
        r = image_store_run_holder(pid, &want);
        if (r == -ENOMEM)
                return true; /* keep the image */
        return r >= 0 && strcmp(want, holder) == 0;
}

int image_store_run_holder(pid_t pid, char **ret) {
        _cleanup_free_ char *stat_text = NULL;
        unsigned long long start = 0;
        char path[64];
        const char *p;
        int r;

        (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        r = read_full_file(path, 4096, &stat_text);
        if (r < 0)
                return r;
        /* After the command's ")": state is field 3, starttime field 22. */
        p = strrchr(stat_text, ')');
        if (!p)
                return -EBADMSG;
        p++;
        for (int field = 3; field < 22; field++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EBADMSG;
        }
        if (sscanf(p, " %llu", &start) != 1)
                return -EBADMSG;
        if (asprintf(ret, "%d-%llu", (int)pid, start) < 0)
                return -ENOMEM;
        return 0;
}

/* Whether the mark "KIND:NAME" names a sandbox or snapshot that exists, or
 * a run whose process runs. */
static bool mark_is_live(ImageStore *s, const char *mark) {
        _cleanup_free_ char *path = NULL;
        const char *colon = strchr(mark, ':');
        struct stat st;

        if (!colon || !store_name_is_valid(colon + 1))
                return false;
        if (strncmp(mark, "sandbox:", 8) == 0) {
                if (asprintf(&path, "%s/sandboxes/%s", s->home, colon + 1) < 0)
                        return true; /* out of memory: keep the image */
        } else if (strncmp(mark, "snapshot:", 9) == 0) {
                if (asprintf(&path, "%s/snapshots/%s", s->home, colon + 1) < 0)
                        return true;
        } else if (strncmp(mark, "run:", 4) == 0)
                return run_is_live(colon + 1);
        else
                return false;
        return lstat(path, &st) == 0;
}

/* Walks refs/<hex>: returns the first live mark in *@ret (or NULL), and
 * removes stale ones when @prune (counted in *@n). */
static int marks_scan(ImageStore *s, const char *hex, bool prune, char **ret, unsigned *n) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int fd = -EBADF;
        char path[128];
        struct dirent *de;

        *ret = NULL;
        (void)snprintf(path, sizeof(path), "refs/%s", hex);
        fd = openat(s->dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);
        while ((errno = 0, de = readdir_no_dot(d))) {
                if (mark_is_live(s, de->d_name)) {
                        if (!*ret) {
                                char *m = strdup(de->d_name), *c;

                                if (!m)
                                        return -ENOMEM;
                                c = strchr(m, ':');
                                *c = ' ';
                                *ret = m;
                        }
                        continue;
                }
                if (prune && unlinkat(dirfd(d), de->d_name, 0) >= 0 && n)
                        (*n)++;
        }
        return 0;
}

int image_store_holder(ImageStore *s, const char *digest, char **ret) {
        if (!oci_digest_is_valid(digest))
                return -EINVAL;
        return marks_scan(s, digest + 7, false, ret, NULL);
}

/* ---- rm and gc ---- */

/* Removes layers/<hex> of every layer no image in @keep uses. */
static int layers_prune(ImageStore *s, json_t *tags, unsigned *n) {
        _cleanup_strv_free_ char **all = NULL, **used = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct dirent *de;
        int r;

        r = manifests_list(s, &all);
        if (r < 0)
                return r;
        STRV_FOREACH(h, all) {
                _cleanup_(image_freep) Image *im = NULL;

                /* SECURITY of the data: an image whose record cannot be
                 * read keeps everything (a damaged record must not make
                 * another image's layers go). */
                if (image_load(s, *h, tags, &im, NULL) < 0)
                        return 0;
                for (size_t i = 0; i < im->n_layers; i++)
                        if (!strv_contains(used, im->layers[i].diff_id + 7) &&
                            strv_extend(&used, im->layers[i].diff_id + 7) < 0)
                                return -ENOMEM;
        }
        fd = openat(s->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);
        while ((errno = 0, de = readdir_no_dot(d))) {
                _cleanup_free_ char *tmp = NULL;

                if (strv_contains(used, de->d_name))
                        continue;
                /* Renamed away first: a half-removed layer is never one
                 * that looks complete. */
                if (asprintf(&tmp, "../.tmp-rm-%s", de->d_name) < 0)
                        return -ENOMEM;
                if (renameat(dirfd(d), de->d_name, dirfd(d), tmp) < 0)
                        continue;
                if (rm_rf_at(s->dirfd, tmp + 3) >= 0 && n)
                        (*n)++;
        }
        return 0;
}

int image_store_remove(ImageStore *s, const char *ref, bool *ret_removed_image,
                       HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *tags = NULL;
        _cleanup_free_ char *hex = NULL, *tag = NULL, *holder = NULL, *tmp = NULL, *digest = NULL;
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_close_ int lock = -EBADF, tlock = -EBADF;
        char path[128];
        int r;

        r = image_store_lock(s, LOCK_EX, &lock);
        if (r >= 0)
                r = tags_lock(s, &tlock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot lock the image store: %s", strerror(-r));
        r = tags_load(s, &tags);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read %s/" TAGS_NAME ": %s", s->dir,
                                       strerror(-r));
        r = ref_find(s, ref, tags, &hex, &tag, reterr);
        if (r < 0)
                return r;
        if (asprintf(&digest, IMAGE_DIGEST_PREFIX "%s", hex) < 0)
                return -ENOMEM;
        r = tags_names_of(tags, digest, &names);
        if (r < 0)
                return r;
        /* Another name keeps the image: only this tag goes. */
        if (tag && strv_length(names) > 1) {
                (void)json_object_del(tags, tag);
                r = tags_save(s, tags);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot write " TAGS_NAME ": %s",
                                               strerror(-r));
                if (ret_removed_image)
                        *ret_removed_image = false;
                return 0;
        }
        r = marks_scan(s, hex, false, &holder, NULL);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read the users of image %s: %s", digest,
                                       strerror(-r));
        if (holder)
                return hutch_error_set(reterr, EBUSY, "image '%s' is used by %s", ref, holder);
        STRV_FOREACH(n, names)
                (void)json_object_del(tags, *n);
        r = tags_save(s, tags);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot write " TAGS_NAME ": %s", strerror(-r));
        /* The commit point: the record's folder leaves manifests/. */
        (void)snprintf(path, sizeof(path), "manifests/%s", hex);
        if (asprintf(&tmp, ".tmp-rm-%s", hex) < 0)
                return -ENOMEM;
        (void)rm_rf_at(s->dirfd, tmp);
        if (renameat(s->dirfd, path, s->dirfd, tmp) < 0)
                return hutch_error_set(reterr, errno, "cannot remove image %s: %m", digest);
        (void)rm_rf_at(s->dirfd, tmp);
        (void)snprintf(path, sizeof(path), "refs/%s", hex);
        (void)rm_rf_at(s->dirfd, path);
        /* Left to gc when it fails: nothing names them any more. */
        (void)layers_prune(s, tags, NULL);
        if (ret_removed_image)
                *ret_removed_image = true;
        return 0;
}

/* Removes the .tmp-* folders of the store nobody holds. */
static int temps_prune(ImageStore *s, unsigned *n) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct dirent *de;

        fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);
        while ((errno = 0, de = readdir_no_dot(d))) {
                _cleanup_close_ int t = -EBADF;

                if (strncmp(de->d_name, ".tmp-", 5) != 0)
                        continue;
                t = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (t >= 0 && flock(t, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
                        continue; /* an import is using it */
                if (rm_rf_at(dirfd(d), de->d_name) >= 0)
                        (*n)++;
        }
        return 0;
}

int image_store_gc(ImageStore *s, unsigned *ret_removed, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *tags = NULL;
        _cleanup_strv_free_ char **all = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int lock = -EBADF, tlock = -EBADF, fd = -EBADF;
        struct dirent *de;
        const char *key;
        void *tmp;
        json_t *v;
        bool changed = false;
        unsigned n = 0;
        int r;

        /* An import holds the lock shared for as long as it runs: gc does
         * not wait for it (nor removes what it may be about to use). */
        r = image_store_lock(s, LOCK_EX | LOCK_NB, &lock);
        if (r == -EWOULDBLOCK) {
                if (ret_removed)
                        *ret_removed = 0;
                return 1;
        }
        if (r >= 0)
                r = tags_lock(s, &tlock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot lock the image store: %s", strerror(-r));
        r = temps_prune(s, &n);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot clean %s: %s", s->dir, strerror(-r));
        r = tags_load(s, &tags);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read %s/" TAGS_NAME ": %s", s->dir,
                                       strerror(-r));
        /* Tags of images that are gone. */
        json_object_foreach_safe(tags, tmp, key, v) {
                if (json_is_string(v) && oci_digest_is_valid(json_string_value(v)) &&
                    manifest_exists(s, json_string_value(v) + 7))
                        continue;
                (void)json_object_del(tags, key);
                changed = true;
                n++;
        }
        if (changed) {
                r = tags_save(s, tags);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot write " TAGS_NAME ": %s",
                                               strerror(-r));
        }
        r = layers_prune(s, tags, &n);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot remove unused layers: %s", strerror(-r));
        /* Marks: stale ones, and those of images that are gone. */
        r = manifests_list(s, &all);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot list the images: %s", strerror(-r));
        fd = openat(s->dirfd, "refs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot open %s/refs: %m", s->dir);
        d = fdopendir(fd);
        if (!d)
                return -ENOMEM;
        TAKE_FD(fd);
        while ((errno = 0, de = readdir_no_dot(d))) {
                _cleanup_free_ char *live = NULL;

                if (!strv_contains(all, de->d_name)) {
                        if (rm_rf_at(dirfd(d), de->d_name) >= 0)
                                n++;
                        continue;
                }
                (void)marks_scan(s, de->d_name, true, &live, &n);
        }
        if (ret_removed)
                *ret_removed = n;
        return 0;
}

/* ---- inspect ---- */

static json_t *strv_to_json(char *const *l) {
        json_t *a;

        if (!l)
                return json_null();
        a = json_array();
        for (size_t i = 0; l[i]; i++)
                if (!a || json_array_append_new(a, json_string(l[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

int image_to_json(const Image *im, char **ret) {
        _cleanup_(json_decrefp) json_t *root = NULL, *layers = NULL, *config = NULL;
        json_t *names;
        char *text;

        names = json_array();
        if (!names)
                return -ENOMEM;
        STRV_FOREACH(n, im->names)
                if (json_array_append_new(names, json_string(image_ref_familiar(*n))) < 0) {
                        json_decref(names);
                        return -ENOMEM;
                }
        layers = json_array();
        if (!layers)
                return -ENOMEM;
        for (size_t i = 0; i < im->n_layers; i++) {
                const ImageLayer *l = &im->layers[i];

                if (json_array_append_new(layers, json_pack("{s:s, s:s, s:I, s:I, s:s?}", "diff_id",
                                                            l->diff_id, "path", l->path, "size",
                                                            (json_int_t)l->size, "blob_size",
                                                            (json_int_t)l->blob_size, "media_type",
                                                            l->media_type)) < 0)
                        return -ENOMEM;
        }
        config = json_pack(
                "{s:s?, s:s?, s:o, s:s?, s:s?, s:o, s:o}", "architecture", im->config.architecture,
                "os", im->config.os, "Env", strv_to_json(im->config.env), "WorkingDir",
                im->config.working_dir, "User", im->config.user, "Entrypoint",
                strv_to_json(im->config.entrypoint), "Cmd", strv_to_json(im->config.cmd));
        if (!config)
                return -ENOMEM;
        root = json_pack("{s:s, s:o, s:s, s:I, s:s, s:O, s:O, s:I, s:b}", "digest", im->digest,
                         "names", names, "format", im->format ?: "unknown", "imported_ms",
                         (json_int_t)im->imported_ms, "config_digest", im->config_digest, "layers",
                         layers, "config", config, "skipped_devices",
                         (json_int_t)im->skipped_devices, "user_owned", im->user_owned);
        if (!root)
                return -ENOMEM;
        text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}
