/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "image/image-oci.h"
#include "strv.h"

/* Nested arrays and objects of these documents are shallow; anything
 * deeper than this is not an image document. */
#define OCI_JSON_DEPTH_MAX 16
/* Entries of an index, and images of a docker save manifest. */
#define OCI_INDEX_MAX 1024
/* Strings of Env, Entrypoint, Cmd: each, and of one vector. */
#define OCI_STRV_MAX 4096
#define OCI_STRING_MAX (64u * 1024)

static const char *const compression_names[_OCI_COMPRESSION_MAX] = {
        [OCI_COMPRESSION_NONE] = "none",
        [OCI_COMPRESSION_GZIP] = "gzip",
        [OCI_COMPRESSION_ZSTD] = "zstd",
};

const char *oci_compression_to_string(OciCompression c) {
        if (c < 0 || c >= _OCI_COMPRESSION_MAX)
                return NULL;
        return compression_names[c];
}

OciCompression oci_compression_from_string(const char *s) {
        for (int i = 0; s && i < _OCI_COMPRESSION_MAX; i++)
                if (strcmp(s, compression_names[i]) == 0)
                        return (OciCompression)i;
        return _OCI_COMPRESSION_INVALID;
}

int oci_layer_media_type_compression(const char *mt) {
        static const struct {
                const char *mt;
                OciCompression c;
        } table[] = {
                {"application/vnd.oci.image.layer.v1.tar", OCI_COMPRESSION_NONE},
                {"application/vnd.oci.image.layer.v1.tar+gzip", OCI_COMPRESSION_GZIP},
                {"application/vnd.oci.image.layer.v1.tar+zstd", OCI_COMPRESSION_ZSTD},
                {"application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_COMPRESSION_NONE},
                {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                 OCI_COMPRESSION_GZIP},
                {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
                 OCI_COMPRESSION_ZSTD},
                {"application/vnd.docker.image.rootfs.diff.tar", OCI_COMPRESSION_NONE},
                {"application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_COMPRESSION_GZIP},
                {"application/vnd.docker.image.rootfs.diff.tar.zstd", OCI_COMPRESSION_ZSTD},
                {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", OCI_COMPRESSION_GZIP},
        };

        for (size_t i = 0; mt && i < ELEMENTSOF(table); i++)
                if (strcmp(mt, table[i].mt) == 0)
                        return (int)table[i].c;
        return -EPROTONOSUPPORT;
}

int oci_media_type_kind(const char *mt) {
        if (!mt)
                return -EPROTONOSUPPORT;
        if (strcmp(mt, OCI_MT_MANIFEST) == 0 || strcmp(mt, DOCKER_MT_MANIFEST) == 0)
                return 1;
        if (strcmp(mt, OCI_MT_INDEX) == 0 || strcmp(mt, DOCKER_MT_LIST) == 0)
                return 2;
        return -EPROTONOSUPPORT;
}

bool oci_digest_is_valid(const char *s) {
        size_t p = strlen(IMAGE_DIGEST_PREFIX);

        return s && strncmp(s, IMAGE_DIGEST_PREFIX, p) == 0 &&
               strlen(s + p) == IMAGE_DIGEST_HEX_LEN &&
               strspn(s + p, "0123456789abcdef") == IMAGE_DIGEST_HEX_LEN;
}

void oci_descriptor_done(OciDescriptor *d) {
        free(d->media_type);
        free(d->digest);
        free(d->os);
        free(d->architecture);
        free(d->variant);
        free(d->ref_name);
        free(d->image_name);
        *d = (OciDescriptor){};
}

void oci_index_done(OciIndex *ix) {
        for (size_t i = 0; ix->manifests && i < ix->n_manifests; i++)
                oci_descriptor_done(&ix->manifests[i]);
        free(ix->manifests);
        *ix = (OciIndex){};
}

void oci_manifest_done(OciManifest *m) {
        free(m->media_type);
        oci_descriptor_done(&m->config);
        for (size_t i = 0; m->layers && i < m->n_layers; i++)
                oci_descriptor_done(&m->layers[i]);
        free(m->layers);
        *m = (OciManifest){};
}

void image_config_done(ImageConfig *c) {
        free(c->architecture);
        free(c->os);
        strv_free(c->env);
        free(c->working_dir);
        free(c->user);
        strv_free(c->entrypoint);
        strv_free(c->cmd);
        *c = (ImageConfig){};
}

void oci_config_done(OciConfig *c) {
        image_config_done(&c->config);
        strv_free(c->diff_ids);
        *c = (OciConfig){};
}

void docker_save_done(DockerSave *d) {
        for (size_t i = 0; d->images && i < d->n_images; i++) {
                free(d->images[i].config);
                strv_free(d->images[i].repo_tags);
                strv_free(d->images[i].layers);
        }
        free(d->images);
        *d = (DockerSave){};
}

static int json_depth_check(json_t *v, unsigned depth) {
        const char *key;
        json_t *child;
        size_t i;

        if (depth > OCI_JSON_DEPTH_MAX)
                return -E2BIG;
        if (json_is_object(v)) {
                json_object_foreach(v, key, child) {
                        int r = json_depth_check(child, depth + 1);

                        if (r < 0)
                                return r;
                }
        } else if (json_is_array(v)) {
                json_array_foreach(v, i, child) {
                        int r = json_depth_check(child, depth + 1);

                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* Parses @text as one JSON value of type object (@want_array: array). */
static int json_load_doc(const char *what, const char *text, size_t len, bool want_array,
                         json_t **ret, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        json_error_t jerr;

        if (len > IMAGE_JSON_MAX)
                return hutch_error_set(reterr, E2BIG, "the %s is larger than %u bytes", what,
                                       IMAGE_JSON_MAX);
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
                return hutch_error_set(reterr, EINVAL, "the %s is not JSON: line %d column %d: %s",
                                       what, jerr.line, jerr.column, jerr.text);
        if (want_array ? !json_is_array(root) : !json_is_object(root))
                return hutch_error_set(reterr, EINVAL, "the %s is not a JSON %s", what,
                                       want_array ? "array" : "object");
        if (json_depth_check(root, 0) < 0)
                return hutch_error_set(reterr, E2BIG, "the %s nests deeper than %d levels", what,
                                       OCI_JSON_DEPTH_MAX);
        *ret = TAKE_PTR(root);
        return 0;
}

/* A member that must be a string when present: 0 and NULL when absent. */
static int get_string(const char *what, json_t *obj, const char *key, bool mandatory, char **ret,
                      HutchError *reterr) {
        json_t *v = json_object_get(obj, key);
        char *s;

        if (!v || (json_is_null(v) && !mandatory)) {
                if (mandatory)
                        return hutch_error_set_pointer(reterr, EINVAL, key, "the %s has no \"%s\"",
                                                       what, key);
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v) || json_string_length(v) > OCI_STRING_MAX)
                return hutch_error_set_pointer(reterr, EINVAL, key,
                                               "the %s's \"%s\" is not a string", what, key);
        s = strdup(json_string_value(v));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* A member that must be an array of strings (or null) when present. */
static int get_strv(const char *what, json_t *obj, const char *key, size_t max, char ***ret,
                    HutchError *reterr) {
        _cleanup_strv_free_ char **l = NULL;
        json_t *v = json_object_get(obj, key), *item;
        size_t i;

        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v) || json_array_size(v) > max)
                return hutch_error_set_pointer(reterr, EINVAL, key,
                                               "the %s's \"%s\" is not an array of at most %zu "
                                               "strings",
                                               what, key, max);
        /* An empty array stays an empty vector, not NULL: "Cmd": [] differs
         * from no Cmd. */
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_array_foreach(v, i, item) {
                int r;

                if (!json_is_string(item) || json_string_length(item) > OCI_STRING_MAX)
                        return hutch_error_set_pointer(reterr, EINVAL, key,
                                                       "the %s's \"%s\" holds a non-string", what,
                                                       key);
                r = strv_extend(&l, json_string_value(item));
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int descriptor_parse(const char *what, json_t *v, OciDescriptor *ret, HutchError *reterr) {
        _cleanup_(oci_descriptor_done) OciDescriptor d = {};
        json_t *size, *platform, *ann;
        int r;

        if (!json_is_object(v))
                return hutch_error_set(reterr, EINVAL, "a descriptor of the %s is not an object",
                                       what);
        r = get_string(what, v, "mediaType", false, &d.media_type, reterr);
        if (r < 0)
                return r;
        r = get_string(what, v, "digest", true, &d.digest, reterr);
        if (r < 0)
                return r;
        if (!oci_digest_is_valid(d.digest))
                return hutch_error_set_pointer(
                        reterr,
                        strncmp(d.digest, IMAGE_DIGEST_PREFIX, 7) == 0 ? EINVAL : EPROTONOSUPPORT,
                        "digest", "the %s names digest '%.80s': only sha256:<64 hex> is supported",
                        what, d.digest);
        size = json_object_get(v, "size");
        if (!json_is_integer(size) || json_integer_value(size) < 0)
                return hutch_error_set_pointer(reterr, EINVAL, "size",
                                               "a descriptor of the %s has no valid \"size\"",
                                               what);
        d.size = (uint64_t)json_integer_value(size);
        platform = json_object_get(v, "platform");
        if (platform) {
                if (!json_is_object(platform))
                        return hutch_error_set_pointer(reterr, EINVAL, "platform",
                                                       "the %s's \"platform\" is not an object",
                                                       what);
                r = get_string(what, platform, "os", true, &d.os, reterr);
                if (r < 0)
                        return r;
                r = get_string(what, platform, "architecture", true, &d.architecture, reterr);
                if (r < 0)
                        return r;
                r = get_string(what, platform, "variant", false, &d.variant, reterr);
                if (r < 0)
                        return r;
        }
        ann = json_object_get(v, "annotations");
        if (ann) {
                if (!json_is_object(ann))
                        return hutch_error_set_pointer(reterr, EINVAL, "annotations",
                                                       "the %s's \"annotations\" is not an object",
                                                       what);
                r = get_string(what, ann, "org.opencontainers.image.ref.name", false, &d.ref_name,
                               reterr);
                if (r < 0)
                        return r;
                r = get_string(what, ann, "io.containerd.image.name", false, &d.image_name, reterr);
                if (r < 0)
                        return r;
        }
        *ret = d;
        d = (OciDescriptor){};
        return 0;
}

static int schema_version_check(const char *what, json_t *root, HutchError *reterr) {
        json_t *v = json_object_get(root, "schemaVersion");

        if (!json_is_integer(v))
                return hutch_error_set_pointer(reterr, EINVAL, "/schemaVersion",
                                               "the %s has no integer \"schemaVersion\"", what);
        if (json_integer_value(v) != 2)
                return hutch_error_set_pointer(reterr, EPROTONOSUPPORT, "/schemaVersion",
                                               "the %s has schemaVersion %" JSON_INTEGER_FORMAT
                                               ", only 2 is supported",
                                               what, json_integer_value(v));
        return 0;
}

int oci_index_parse(const char *text, size_t len, OciIndex *ret, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_(oci_index_done) OciIndex ix = {};
        json_t *arr, *item;
        size_t i;
        int r;

        r = json_load_doc("image index", text, len, false, &root, reterr);
        if (r < 0)
                return r;
        r = schema_version_check("image index", root, reterr);
        if (r < 0)
                return r;
        arr = json_object_get(root, "manifests");
        if (!json_is_array(arr) || json_array_size(arr) > OCI_INDEX_MAX)
                return hutch_error_set_pointer(reterr, EINVAL, "/manifests",
                                               "the image index's \"manifests\" is not an array "
                                               "of at most %d descriptors",
                                               OCI_INDEX_MAX);
        ix.manifests = calloc(json_array_size(arr) + 1, sizeof(OciDescriptor));
        if (!ix.manifests)
                return -ENOMEM;
        json_array_foreach(arr, i, item) {
                r = descriptor_parse("image index", item, &ix.manifests[i], reterr);
                if (r < 0)
                        return r;
                ix.n_manifests++;
        }
        *ret = ix;
        ix = (OciIndex){};
        return 0;
}

int oci_manifest_parse(const char *text, size_t len, OciManifest *ret, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_(oci_manifest_done) OciManifest m = {};
        json_t *arr, *item;
        size_t i;
        int r;

        r = json_load_doc("image manifest", text, len, false, &root, reterr);
        if (r < 0)
                return r;
        r = schema_version_check("image manifest", root, reterr);
        if (r < 0)
                return r;
        r = get_string("image manifest", root, "mediaType", false, &m.media_type, reterr);
        if (r < 0)
                return r;
        if (m.media_type && oci_media_type_kind(m.media_type) != 1)
                return hutch_error_set_pointer(reterr, EPROTONOSUPPORT, "/mediaType",
                                               "unknown media type '%.100s' of an image manifest",
                                               m.media_type);
        r = descriptor_parse("image manifest", json_object_get(root, "config"), &m.config, reterr);
        if (r < 0)
                return r;
        if (m.config.media_type && strcmp(m.config.media_type, OCI_MT_CONFIG) != 0 &&
            strcmp(m.config.media_type, DOCKER_MT_CONFIG) != 0)
                return hutch_error_set_pointer(reterr, EPROTONOSUPPORT, "/config/mediaType",
                                               "unknown media type '%.100s' of an image config "
                                               "(an artifact, not an image?)",
                                               m.config.media_type);
        arr = json_object_get(root, "layers");
        if (!json_is_array(arr) || json_array_size(arr) > IMAGE_LAYERS_MAX)
                return hutch_error_set_pointer(reterr, json_is_array(arr) ? E2BIG : EINVAL,
                                               "/layers",
                                               "the image manifest's \"layers\" is not an array "
                                               "of at most %d descriptors",
                                               IMAGE_LAYERS_MAX);
        m.layers = calloc(json_array_size(arr) + 1, sizeof(OciDescriptor));
        if (!m.layers)
                return -ENOMEM;
        json_array_foreach(arr, i, item) {
                r = descriptor_parse("image manifest", item, &m.layers[i], reterr);
                if (r < 0)
                        return r;
                m.n_layers++;
                if (oci_layer_media_type_compression(m.layers[i].media_type) < 0)
                        return hutch_error_set_pointer(reterr, EPROTONOSUPPORT, "/layers",
                                                       "unknown media type '%.100s' of layer %zu",
                                                       m.layers[i].media_type ?: "(none)", i);
        }
        *ret = m;
        m = (OciManifest){};
        return 0;
}

static int config_fields(json_t *root, ImageConfig *c, HutchError *reterr) {
        const char *what = "image config";
        json_t *cfg;
        int r;

        r = get_string(what, root, "architecture", false, &c->architecture, reterr);
        if (r < 0)
                return r;
        r = get_string(what, root, "os", false, &c->os, reterr);
        if (r < 0)
                return r;
        cfg = json_object_get(root, "config");
        if (!cfg || json_is_null(cfg))
                return 0;
        if (!json_is_object(cfg))
                return hutch_error_set_pointer(reterr, EINVAL, "/config",
                                               "the image config's \"config\" is not an object");
        r = get_strv(what, cfg, "Env", OCI_STRV_MAX, &c->env, reterr);
        if (r < 0)
                return r;
        STRV_FOREACH(e, c->env)
                if (!strchr(*e, '=') || **e == '=')
                        return hutch_error_set_pointer(reterr, EINVAL, "/config/Env",
                                                       "the image config's Env holds '%.80s', "
                                                       "not KEY=VALUE",
                                                       *e);
        r = get_string(what, cfg, "WorkingDir", false, &c->working_dir, reterr);
        if (r < 0)
                return r;
        r = get_string(what, cfg, "User", false, &c->user, reterr);
        if (r < 0)
                return r;
        r = get_strv(what, cfg, "Entrypoint", OCI_STRV_MAX, &c->entrypoint, reterr);
        if (r < 0)
                return r;
        return get_strv(what, cfg, "Cmd", OCI_STRV_MAX, &c->cmd, reterr);
}

int image_config_parse(const char *text, size_t len, ImageConfig *ret, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_(image_config_done) ImageConfig c = {};
        int r;

        r = json_load_doc("image config", text, len, false, &root, reterr);
        if (r < 0)
                return r;
        r = config_fields(root, &c, reterr);
        if (r < 0)
                return r;
        *ret = c;
        c = (ImageConfig){};
        return 0;
}

int oci_config_parse(const char *text, size_t len, OciConfig *ret, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_(oci_config_done) OciConfig c = {};
        json_t *rootfs, *type;
        int r;

        r = json_load_doc("image config", text, len, false, &root, reterr);
        if (r < 0)
                return r;
        r = config_fields(root, &c.config, reterr);
        if (r < 0)
                return r;
        rootfs = json_object_get(root, "rootfs");
        type = json_object_get(rootfs, "type");
        if (!json_is_object(rootfs) || !json_is_string(type) ||
            strcmp(json_string_value(type), "layers") != 0)
                return hutch_error_set_pointer(reterr, EINVAL, "/rootfs",
                                               "the image config's \"rootfs\" is not "
                                               "{\"type\": \"layers\", ...}");
        r = get_strv("image config", rootfs, "diff_ids", IMAGE_LAYERS_MAX, &c.diff_ids, reterr);
        if (r < 0)
                return r;
        if (!c.diff_ids)
                return hutch_error_set_pointer(reterr, EINVAL, "/rootfs/diff_ids",
                                               "the image config has no rootfs.diff_ids");
        STRV_FOREACH(d, c.diff_ids)
                if (!oci_digest_is_valid(*d))
                        return hutch_error_set_pointer(reterr, EPROTONOSUPPORT, "/rootfs/diff_ids",
                                                       "the image config names diff id "
                                                       "'%.80s': only sha256:<64 hex> is "
                                                       "supported",
                                                       *d);
        *ret = c;
        c = (OciConfig){};
        return 0;
}

int docker_save_parse(const char *text, size_t len, DockerSave *ret, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_(docker_save_done) DockerSave d = {};
        const char *what = "docker save manifest.json";
        json_t *item;
        size_t i;
        int r;

        r = json_load_doc(what, text, len, true, &root, reterr);
        if (r < 0)
                return r;
        if (json_array_size(root) == 0 || json_array_size(root) > OCI_INDEX_MAX)
                return hutch_error_set(reterr, EINVAL, "the %s lists no image, or too many", what);
        d.images = calloc(json_array_size(root), sizeof(DockerSaveImage));
        if (!d.images)
                return -ENOMEM;
        json_array_foreach(root, i, item) {
                DockerSaveImage *im = &d.images[i];

                d.n_images++;
                if (!json_is_object(item))
                        return hutch_error_set(reterr, EINVAL,
                                               "an image of the %s is not an object", what);
                r = get_string(what, item, "Config", true, &im->config, reterr);
                if (r < 0)
                        return r;
                r = get_strv(what, item, "RepoTags", OCI_INDEX_MAX, &im->repo_tags, reterr);
                if (r < 0)
                        return r;
                r = get_strv(what, item, "Layers", IMAGE_LAYERS_MAX, &im->layers, reterr);
                if (r < 0)
                        return r;
                if (!im->layers)
                        return hutch_error_set_pointer(reterr, EINVAL, "Layers",
                                                       "an image of the %s has no \"Layers\"",
                                                       what);
        }
        *ret = d;
        d = (DockerSave){};
        return 0;
}

int oci_index_pick(const OciIndex *ix, HutchError *reterr) {
        char seen[256] = "";
        size_t used = 0;
        int without = -1, n_without = 0;

        for (size_t i = 0; i < ix->n_manifests; i++) {
                const OciDescriptor *d = &ix->manifests[i];

                if (!d->os) {
                        if (without < 0)
                                without = (int)i;
                        n_without++;
                        continue;
                }
                if (strcmp(d->os, "linux") == 0 && strcmp(d->architecture, "amd64") == 0)
                        return (int)i;
                if (used < sizeof(seen) - 1) {
                        int n = snprintf(seen + used, sizeof(seen) - used, "%s%.32s/%.32s",
                                         used ? ", " : "", d->os, d->architecture);

                        used = n < 0 ? used : MIN(used + (size_t)n, sizeof(seen) - 1);
                }
        }
        if (n_without == 1)
                return without;
        if (ix->n_manifests == 0)
                return hutch_error_set(reterr, ENXIO, "the image index lists no manifest");
        return hutch_error_set(reterr, ENXIO, "no image for linux/amd64 in the index (it has: %s)",
                               used ? seen : "images without a platform");
}
